"""What the GPU scripts share: the copy bandwidth, the environment line, per-tree workers, and
the GEMM scripts' shapes, tree import, cold weights, row checks and graph timing."""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch

from gdn_parity.drift.cost.floor import copy_bandwidth  # noqa: F401  (the scripts' import)


def gpu_env(**extra: object) -> dict:
    """The GPU, torch and triton of this process, plus ``extra``."""
    import triton

    return {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        **extra,
    }


def run_worker(script: str, name: str, tree: Path) -> list[dict]:
    """``script --worker TREE`` in a fresh process (one sglang tree per process).

    The worker prints its rows as JSON on its last line of output.
    """
    proc = subprocess.run(
        [sys.executable, script, "--worker", str(tree)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def replay_samples(graph: torch.cuda.CUDAGraph, calls: int, replays: int) -> list[float]:
    """Microseconds per captured call, one sample per replay of ``graph``."""
    graph.replay()
    torch.cuda.synchronize()
    samples = []
    for _ in range(replays):
        start, end = torch.cuda.Event(True), torch.cuda.Event(True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / calls)
    return samples


def tree_batch_invariant_ops(tree: Path) -> ModuleType:
    """The tree's ``sglang.srt.batch_invariant_ops.batch_invariant_ops`` (bare sglang import)."""
    from gdn_parity.sandbox.bare_import import import_sglang_from

    import_sglang_from(tree)
    from sglang.srt.batch_invariant_ops import batch_invariant_ops

    return batch_invariant_ops


def dispatched_gemm(bio: ModuleType) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """``a @ w.T`` (``w`` an nn.Linear weight ``[N, K]``) as batch-invariant mode runs it on the
    Triton route (``_matmul_persistent_triton``: the tree's 0009 and 0012 where it has them)."""

    def run(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return bio._matmul_persistent_triton(a, w.t(), out_dtype=a.dtype)

    return run


def cold_weights(w: torch.Tensor) -> list[torch.Tensor]:
    """``w`` and copies of it, 2 to 200 and over 512 MiB in all where that takes at most 200:
    a timed graph calls the GEMM once per copy, so that no call finds its weight in L2."""
    copies = min(200, max(2, math.ceil((512 << 20) / w.nbytes)))
    return [w] + [w.clone() for _ in range(copies - 1)]


def linear_operands(
    rows: int, n: int, k: int, dtype: torch.dtype = torch.bfloat16, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Activations ``[rows, k]`` and an nn.Linear weight ``[n, k]`` (scaled by 1/sqrt(k)) from
    one CUDA generator seeded ``seed``, in that order, made in fp32 and cast to ``dtype``."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(rows, k, device="cuda", generator=gen).to(dtype)
    w = (torch.randn(n, k, device="cuda", generator=gen) / math.sqrt(k)).to(dtype)
    return a, w


def env_line(env: dict) -> str:
    """The first line of a GEMM study's summary: the GPU, torch, triton, the copy bandwidth."""
    return (
        f"GPU {env['gpu']}, torch {env['torch']}, triton {env['triton']}, "
        f"copy bandwidth {env['copy_bandwidth_TBps']:.2f} TB/s"
    )


def fastest_per_kind(row: dict, skip: set[str]) -> dict[str, tuple[float, str]]:
    """Of one M's timings (``label: {"median_us": ...}``; a label is its kind, then its tile as
    the last word), the fastest median and its tile per kind; ``skip``'s labels, non-timings
    and timing errors left out."""
    best: dict[str, tuple[float, str]] = {}
    for label, t in row.items():
        if label in skip or not isinstance(t, dict) or "median_us" not in t:
            continue
        kind, tile = label.rsplit(" ", 1)
        if kind not in best or t["median_us"] < best[kind][0]:
            best[kind] = (t["median_us"], tile)
    return best


def candidate_cells(
    best: dict[str, tuple[float, str]], cublas_us: float, dispatched_us: float
) -> str:
    """``fastest_per_kind``'s result as a table cell: tile, us, and its ratios to cuBLAS and to
    the dispatched GEMM."""
    return ", ".join(
        f"{kind} {tile} {us:.1f} ({us / cublas_us:.2f}, {us / dispatched_us:.2f})"
        for kind, (us, tile) in sorted(best.items())
    )


def forward_estimate(
    shapes: dict,
    best_exact: dict[tuple[str, int], float],
    per_forward: dict[str, int],
    ms: list[int],
    aside: str,
) -> list[str]:
    """Per M of ``ms``, the sum over one forward's GEMMs (``per_forward``: shape -> how many) of
    cuBLAS, the dispatched GEMM and the faster of it and the fastest exact candidate
    (``best_exact[shape, M]``): what the candidates could take off a step of M rows (the step
    itself is ``gdn-parity cost``'s)."""
    if set(per_forward) - set(shapes):
        return ["(no estimate for the forward: not every shape of PER_FORWARD was run)"]
    lines = [
        f"One forward's GEMMs ({aside} aside), ms: cuBLAS / dispatched / with the fastest exact "
        "candidate where it is faster",
    ]
    for m in ms:
        rows = {s: shapes[s]["time"][m] for s in per_forward}
        cub = sum(per_forward[s] * r["cublas"]["median_us"] for s, r in rows.items())
        disp = sum(per_forward[s] * r["dispatched"]["median_us"] for s, r in rows.items())
        cand = sum(
            per_forward[s] * min(r["dispatched"]["median_us"], best_exact.get((s, m), math.inf))
            for s, r in rows.items()
        )
        lines.append(f"- M = {m}: {cub / 1e3:.2f} / {disp / 1e3:.2f} / {cand / 1e3:.2f}")
    return lines


def study_args(
    default_shapes: list[str],
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.Namespace:
    """A GEMM study's command line: --tree, --out (made here), --shapes, --replays, and the
    study's own arguments (``add_arguments``)."""
    p = argparse.ArgumentParser()
    p.add_argument("--tree", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--shapes", default=",".join(default_shapes))
    p.add_argument("--replays", type=int, default=10)
    if add_arguments is not None:
        add_arguments(p)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    return args


SHAPES = {  # name: (N out, K in); the 27B's from Qwen3.5-27B's config (docs/design/...)
    "27b.in_proj_qkvz": (16384, 5120),
    "27b.in_proj_ba": (96, 5120),
    "27b.qkv_gate": (14336, 5120),
    "27b.o_proj": (5120, 6144),  # GDN out_proj has the same shape
    "27b.gate_up": (34816, 5120),
    "27b.down": (5120, 17408),
    "27b.lm_head": (248320, 5120),
    "large.in_proj_qkvz": (3072, 1024),
    "large.in_proj_ba": (16, 1024),
    "large.qkv": (1536, 1024),
    "large.o_proj": (1024, 1024),
    "large.gate_up": (6144, 1024),
    "large.down": (1024, 3072),
    "large.lm_head": (248320, 1024),
}


def bits(run: Callable, a: torch.Tensor, w: torch.Tensor, ref: torch.Tensor, ms) -> dict:
    """M values where rows differ from the reference, and where row 0 differs from M = 1's."""
    row0 = run(a[:1], w)[0]
    bad_ref, bad_self = [], []
    for m in ms:
        out = run(a[:m], w)
        if not torch.equal(out, ref[:m]):
            bad_ref.append(m)
        if not torch.equal(out[0], row0):
            bad_self.append(m)
    return {"checked": len(ms), "differ_ref": bad_ref, "differ_self": bad_self}


def time_kernel(run: Callable, a: torch.Tensor, weights: list[torch.Tensor], replays: int):
    for w in weights[:2]:
        run(a, w)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for w in weights:
            run(a, w)
    samples = sorted(replay_samples(graph, len(weights), replays))
    q = statistics.quantiles(samples, n=10, method="inclusive")
    return {"median_us": statistics.median(samples), "p10_us": q[0], "p90_us": q[-1]}
