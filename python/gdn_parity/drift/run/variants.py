"""The numerics the demo compares, each the real sglang code of a prefix of the series.

Patch 0001 (the state trace) changes no numerics, so the 0.5.23 variant is the
base plus that patch alone: the harness traces every variant with sglang's own
tracer.

The first five are server configurations (flags). The ``ISOLATING`` ones are the
attribution's experiments on the server stack: every source of decode/verify
difference made exact but one, so a divergence there is that source's alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gdn_parity.errors import GdnParityError
from gdn_parity.queue.cache import cache_dir
from gdn_parity.queue.changes import series_changes
from gdn_parity.queue.series import Series
from gdn_parity.queue.tree import materialise_tree

TRACE_MODULE = "python/sglang/srt/layers/attention/linear/gdn_state_trace.py"


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    patches: int | None  # a prefix of the series; None: all of it
    exact_parity: bool
    deterministic: bool = False  # --enable-deterministic-inference (the server stack reads it)
    # The one source left as a default server computes it (server.numerics.SOURCES), or
    # "none"; None: a server configuration, the flags above say what runs.
    isolate: str | None = None


def _isolating(source: str, description: str) -> Variant:
    """Deterministic inference and the flag, one source reverted to the server's default."""
    name = "exact-stack" if source == "none" else f"only-{source}"
    return Variant(name, description, None, source != "gdn", deterministic=True, isolate=source)


ISOLATING = (
    _isolating(
        "none",
        "every source exact: batch-invariant mode (its GEMMs above all), deterministic "
        "attention (0008), decode's conv through causal_conv1d_update, the flag",
    ),
    _isolating("gemm", "exact-stack but without batch-invariant mode: torch's default GEMMs"),
    _isolating("attention", "exact-stack but the Triton backend's default attention"),
    _isolating("conv", "exact-stack but decode's fused projection/conv kernel (CUDA)"),
    _isolating("gdn", "exact-stack but the default GDN verify kernel (flag off)"),
)

VARIANTS = (
    Variant("0.5.23", "sglang 0.5.23's kernels (the series' fixes off)", 1, False),
    Variant("beta-aligned", "the series, flag off: the default kernels", None, False),
    Variant("exact-parity", "the series with --gdn-verify-exact-parity", None, True),
    Variant(
        "deterministic",
        "the series with --enable-deterministic-inference, flag off",
        None,
        False,
        deterministic=True,
    ),
    Variant(
        "deterministic-exact-parity",
        "the series with --enable-deterministic-inference and --gdn-verify-exact-parity",
        None,
        True,
        deterministic=True,
    ),
    *ISOLATING,
)


def variant_named(name: str) -> Variant:
    for variant in VARIANTS:
        if variant.name == name:
            return variant
    raise GdnParityError(f"no variant {name!r}; choose from {[v.name for v in VARIANTS]}")


def variant_tree(series: Series, variant: Variant) -> Path:
    """The materialised tree of the variant's prefix of the series (cached)."""
    if variant.patches is None:
        return materialise_tree(series, cache_dir() / "variant-series")
    tree = materialise_tree(series.prefix(variant.patches), cache_dir() / f"variant-{variant.name}")
    if TRACE_MODULE not in {c.path for c in series_changes(tree)}:
        raise GdnParityError(
            f"patch {series.patches[0]} does not add {TRACE_MODULE}: the series must "
            "start with the state trace for the 0.5.23 variant"
        )
    return tree
