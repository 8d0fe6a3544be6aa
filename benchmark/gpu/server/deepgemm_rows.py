"""DeepGEMM as batch-invariant mode runs it on SM90: are its rows M-invariant, and how fast is
it at decode and verify sizes?

Where ``deep_gemm`` imports (sglang 0.5.23 pins sgl-deep-gemm), batch-invariant mode sends an
unquantized model's bf16 GEMMs to DeepGEMM's ``bf16_gemm_nn`` with its deterministic
algorithms (``batch_invariant_ops.matmul_persistent``), ahead of the tree's Triton route.
For each shape of ``gpu_common.SHAPES`` (the 27B's and the 1024-wide model's), both routes:

- bits: rows at every M of ``ROWS`` against the route's own 256-row product (a row that
  changes with M breaks token identity between decode and verify), and DeepGEMM's rows
  against the Triton route's;
- time: CUDA-graph replays over cold copies of the weight (``gpu_common.time_kernel``) at
  M in ``TIMED``, beside cuBLAS and the floor (weight, activation and output bytes over the
  copy bandwidth measured here).

Usage (the server's environment: benchmark/gpu/server/env.sh):
    python3 benchmark/gpu/server/deepgemm_rows.py --tree TREE --out DIR [--shapes A,B]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import gpu_common  # noqa: E402
from gpu_common import SHAPES, time_kernel  # noqa: E402

ROWS = [*range(1, 17), 20, 24, 32, 40, 48, 64, 80, 96, 128, 160, 192, 224, 256]
TIMED = [1, 4, 16, 64, 256]
Gemm = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def routes(bio) -> dict[str, Gemm]:
    """``a @ w.T`` for an nn.Linear weight ``w`` through each route of the mode's mm."""
    return {
        "deepgemm": lambda a, w: bio._matmul_persistent_deepgemm(a, w.t(), out_dtype=a.dtype),
        "triton": gpu_common.dispatched_gemm(bio),
    }


def differing_rows(run: Gemm, a: torch.Tensor, w: torch.Tensor, ref: torch.Tensor) -> list[int]:
    """The M of ``ROWS`` whose product differs from ``ref``'s first M rows."""
    return [m for m in ROWS if not torch.equal(run(a[:m], w), ref[:m])]


def shape_row(name: str, bio, bandwidth: float, replays: int) -> dict:
    n, k = SHAPES[name]
    a, w = gpu_common.linear_operands(max(ROWS), n, k)
    runs = routes(bio)
    refs = {route: run(a, w) for route, run in runs.items()}
    row: dict = {
        "shape": name,
        "n": n,
        "k": k,
        "m_variant": {r: differing_rows(run, a, w, refs[r]) for r, run in runs.items()},
        "deepgemm_equals_triton": torch.equal(refs["deepgemm"], refs["triton"]),
        "times": {},
    }
    weights = gpu_common.cold_weights(w)
    timed = {**runs, "cublas": lambda x, v: F.linear(x, v)}
    for m in TIMED:
        floor_us = 2 * (n * k + m * k + m * n) / bandwidth * 1e6
        cells = {label: time_kernel(run, a[:m], weights, replays) for label, run in timed.items()}
        row["times"][m] = {"floor_us": floor_us, **cells}
    return row


def table(rows: list[dict], env: dict) -> str:
    lines = [
        gpu_common.env_line(env),
        "",
        "| shape | M | DeepGEMM µs | Triton route µs | cuBLAS µs | floor µs |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        for m, cells in row["times"].items():
            lines.append(
                f"| {row['shape']} | {m} | {cells['deepgemm']['median_us']:.1f} | "
                f"{cells['triton']['median_us']:.1f} | {cells['cublas']['median_us']:.1f} | "
                f"{cells['floor_us']:.1f} |"
            )
    lines += ["", "| shape | M where DeepGEMM's rows change | Triton route's | DeepGEMM = Triton |"]
    lines.append("|---|---|---|---|")
    for row in rows:
        mv = row["m_variant"]
        lines.append(
            f"| {row['shape']} | {mv['deepgemm'] or 'none'} | {mv['triton'] or 'none'} | "
            f"{row['deepgemm_equals_triton']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tree", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--shapes", default=",".join(SHAPES), help="names of gpu_common.SHAPES")
    p.add_argument("--replays", type=int, default=10)
    args = p.parse_args()
    shapes = args.shapes.split(",")
    unknown = [s for s in shapes if s not in SHAPES]
    if unknown:
        p.error(f"unknown shapes: {unknown}")
    args.out.mkdir(parents=True, exist_ok=True)
    bio = gpu_common.tree_batch_invariant_ops(args.tree)
    env = gpu_common.gpu_env(copy_bandwidth_TBps=gpu_common.copy_bandwidth() / 1e12)
    rows = []
    for name in shapes:
        rows.append(shape_row(name, bio, env["copy_bandwidth_TBps"] * 1e12, args.replays))
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "times"}), flush=True)
    (args.out / "deepgemm_rows.json").write_text(json.dumps({"env": env, "rows": rows}, indent=1))
    (args.out / "deepgemm_rows.md").write_text(table(rows, env))
    print(table(rows, env))


if __name__ == "__main__":
    main()
