"""The two stacks the harness runs the model on, and how a run picks one.

``rowwise`` (``hybrid.HybridModel``): one request; non-GDN math one row at a
time in plain torch, so it is row-invariant by construction: the control, and
the CPU default. ``server`` (``server.model.ServerModel``): a padded batch of
requests through sglang's own backends, one GEMM per linear layer: what a
server computes in each forward mode, and the CUDA default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gdn_parity.drift.model.hybrid import HybridModel
    from gdn_parity.drift.model.server.model import ServerModel
    from gdn_parity.drift.model.weights import ModelWeights

STACKS = ("server", "rowwise")


def kv_cache_problem(stack: str, kv_cache_dtype: str, kv_scale: float | None) -> str | None:
    """Why ``stack`` cannot keep this KV cache, naming the fix; None when it can."""
    if kv_scale is not None and kv_cache_dtype == "auto":
        return (
            "--kv-cache-scale scales K/V into a quantized pool: pass --kv-cache-dtype "
            "fp8_e4m3 with it"
        )
    if stack == "rowwise" and kv_cache_dtype != "auto":
        return (
            f"--kv-cache-dtype {kv_cache_dtype}: the row-wise stack keeps K/V in the model's "
            "dtype (it has no sglang KV pool); pass --stack server"
        )
    return None


def describe_kv_cache(dtype: str, kv_cache_dtype: str, kv_scale: float | None) -> str:
    """The KV cache a run keeps, in a report's words: ``dtype`` is the model's (``auto``)."""
    if kv_cache_dtype == "auto":
        return f"{dtype} KV cache"
    scales = (
        "no K/V scales: 1.0, as sglang for a checkpoint without them"
        if kv_scale is None
        else f"K/V scale {kv_scale:g}"
    )
    return f"{kv_cache_dtype} KV cache ({scales})"


def default_stack(device: str) -> str:
    return "server" if device == "cuda" else "rowwise"


@dataclass(frozen=True)
class StackSpec:
    stack: str
    size: str
    device: str
    max_len: int
    ssm_dtype: str = "bfloat16"
    dtype: str = "bfloat16"  # activations and weights: sglang's --dtype
    attention: str = "torch"  # the row-wise stack's full attention
    deterministic: bool = False  # the server stack's --enable-deterministic-inference
    exact_parity: bool = False  # --gdn-verify-exact-parity (the row-wise stack: for live_sources)
    # The server stack's one source left as by default, the others exact ("none": all
    # exact; server.numerics.ServerNumerics.isolating); None: as the flags above set them.
    isolate: str | None = None
    requests: int = 5  # the server stack's batch (padded to a CUDA-graph size)
    # The server stack's KV pool: sglang's --kv-cache-dtype ("auto": the model's dtype, or
    # "fp8_e4m3"), and a checkpoint's per-tensor K/V scale (None: none, as sglang's layers of
    # an unquantized checkpoint). The row-wise stack keeps K/V in the model's dtype.
    kv_cache_dtype: str = "auto"
    kv_scale: float | None = None


def build_stack(
    spec: StackSpec, rid: str = "req-0", weights: ModelWeights | None = None
) -> HybridModel | ServerModel:
    """The stack ``spec`` names; ``weights``: the server stack's (default: the size's seeded)."""
    import torch

    from gdn_parity.drift.model.config import SIZES
    from gdn_parity.drift.model.hybrid import HybridModel
    from gdn_parity.drift.model.kernels import load_kernels
    from gdn_parity.drift.model.weights import make_weights

    problem = kv_cache_problem(spec.stack, spec.kv_cache_dtype, spec.kv_scale)
    if problem is not None:
        raise ValueError(problem)
    if spec.stack == "rowwise":
        if spec.deterministic or spec.isolate is not None:
            raise ValueError("deterministic inference needs the server stack (--stack server)")
        return HybridModel.build(
            spec.size,
            spec.device,
            max_len=spec.max_len,
            ssm_dtype=spec.ssm_dtype,
            dtype=getattr(torch, spec.dtype),
            rid=rid,
            attention=spec.attention,
            exact_parity=spec.exact_parity,
        )
    if spec.stack != "server":
        raise ValueError(f"stack must be one of {STACKS}")
    from gdn_parity.drift.model.server.model import ServerModel
    from gdn_parity.drift.model.server.numerics import ServerNumerics

    config = SIZES[spec.size]
    kernels = load_kernels()
    numerics = (
        ServerNumerics.of_server(spec.deterministic, spec.exact_parity)
        if spec.isolate is None
        else ServerNumerics.isolating(spec.isolate)
    )
    return ServerModel(
        config,
        weights or make_weights(config, spec.device, getattr(torch, spec.dtype)),
        kernels,
        numerics,
        device=spec.device,
        max_len=spec.max_len,
        requests=spec.requests,
        ssm_dtype=getattr(torch, spec.ssm_dtype),
        kv_cache_dtype=spec.kv_cache_dtype,
        kv_scale=spec.kv_scale,
        rid=rid,
    )
