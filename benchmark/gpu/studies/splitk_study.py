"""Issue #24: a fixed split-K for the narrow weights (at most 256 columns), the route left
for ``in_proj_ba`` (96 columns, K = 5120), where patch 0009's one-program-per-tile kernel
is 1.09-1.33x cuBLAS at M <= 64: 6 programs stream K alone.

A split-K keeps a row's bits the same at every M only if the split is the same at every M
(prefill too): each split's partial is one fp32 accumulator over tl.dot chunks from its
first K, which the tile does not change (``gemm_study``), and the partials are added in
split order by a second kernel (``gemm_study.splitk_reduce``). It changes the bits of these
layers against today's mode.
This measures, per shape of at most 256 columns and per split count S (fixed at every M):

- bits: the rows at every M from 1 to 512 equal the 512-row product taken with another
  tile (64 rows), so neither M nor the tile changes a row;
- time: M in 1, 4, 16, 64, 256 (decode, verify) and 1024, 4096, 8192 (prefill, where the
  mode runs the persistent kernel today), against cuBLAS, the tree's GEMM as batch-invariant
  mode dispatches it (0009), and the floor; CUDA-graph replays on cold weights, median and
  p10-p90 (``gemm_study.time_kernel``).

Usage: python splitk_study.py --tree TREE --out DIR [--splits 2,4,8,16] [--replays 10]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # gpu_common
from gemm_study import splitk_reduce  # noqa: E402

import gpu_common  # noqa: E402
from gpu_common import SHAPES, time_kernel  # noqa: E402

NARROW = 256  # the widest weight the split serves
DECODE_M = [1, 4, 16, 64, 256]
PREFILL_M = [1024, 4096, 8192]
BK = 256


@triton.jit
def partial_kernel(
    a_ptr, w_ptr, p_ptr, M, N, K, stride_am, stride_wn, K_PER_SPLIT,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):  # fmt: skip
    """Split ``program_id(2)``'s partial product over its K range; rows past M masked."""
    pid_n, pid_m, split = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    k_begin = split * K_PER_SPLIT
    k_end = tl.minimum(k_begin + K_PER_SPLIT, K)
    for k0 in range(0, tl.cdiv(K_PER_SPLIT, BK)):
        kk = k_begin + k0 * BK + offs_k
        a = tl.load(
            a_ptr + offs_m[:, None] * stride_am + kk[None, :],
            mask=(offs_m[:, None] < M) & (kk[None, :] < k_end),
            other=0.0,
        )
        w = tl.load(
            w_ptr + offs_n[None, :] * stride_wn + kk[:, None],
            mask=(offs_n[None, :] < N) & (kk[:, None] < k_end),
            other=0.0,
        )
        acc = tl.dot(a, w, acc)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(p_ptr + split * M * N + offs_m[:, None] * N + offs_n[None, :], acc, mask=mask)


def tile_for(m: int) -> tuple[int, int, int, int]:
    """(BM, BN, warps, stages) by M: 16-row tiles for decode, 64 rows beyond 64."""
    if m <= 16:
        return 16, 16, 2, 4
    if m <= 64:
        return 32, 32, 2, 4
    return 64, 32, 4, 3


def split_k(splits: int, tile: Callable[[int], tuple] = tile_for) -> Callable:
    def run(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        n = w.shape[0]
        bm, bn, warps, stages = tile(m)
        per = triton.cdiv(triton.cdiv(k, splits), BK) * BK  # K chunks never straddle splits
        p = torch.empty(splits, m, n, device=a.device, dtype=torch.float32)
        c = torch.empty(m, n, device=a.device, dtype=a.dtype)
        grid = (triton.cdiv(n, bn), triton.cdiv(m, bm), splits)
        partial_kernel[grid](
            a, w, p, m, n, k, a.stride(0), w.stride(0), per, BM=bm, BN=bn, BK=BK,
            num_warps=warps, num_stages=stages,
        )  # fmt: skip
        # the partials added in split order, then cast: the same order at every M
        splitk_reduce[(triton.cdiv(m * n, 1024),)](p, c, m * n, SPLITS=splits, BLOCK=1024)
        return c

    return run


def rows_differ(run: Callable, a: torch.Tensor, w: torch.Tensor, ref: torch.Tensor) -> list[int]:
    """The M in 1..len(a) whose rows differ from ``ref``'s first M rows."""
    return [m for m in range(1, a.shape[0] + 1) if not torch.equal(run(a[:m], w), ref[:m])]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tree", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--splits", default="2,4,8,16")
    p.add_argument("--replays", type=int, default=10)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    bio = gpu_common.tree_batch_invariant_ops(args.tree)
    mode_gemm = gpu_common.dispatched_gemm(bio)

    splits = [int(s) for s in args.splits.split(",")]
    t0 = time.time()
    bw = gpu_common.copy_bandwidth()
    result = {
        "env": gpu_common.gpu_env(copy_bandwidth_TBps=bw / 1e12),
        "splits": splits,
        "shapes": {},
    }
    for shape, (n, k) in SHAPES.items():
        if n > NARROW:
            continue
        a, w = gpu_common.linear_operands(max(PREFILL_M), n, k)
        entry = {"N": n, "K": k, "bits": {}, "time": {}}
        for s in splits:
            ref = split_k(s, lambda m: (64, 32, 4, 3))(a[:512], w)
            entry["bits"][s] = rows_differ(split_k(s), a[:512], w, ref)
        ws = gpu_common.cold_weights(w)
        for m in DECODE_M + PREFILL_M:
            x = a[:m].contiguous()
            row = {
                "floor_us": (n * k * 2 + m * k * 2 + m * n * 2) / bw * 1e6,
                "cublas": time_kernel(torch.nn.functional.linear, x, ws, args.replays),
                "mode": time_kernel(mode_gemm, x, ws, args.replays),
            }
            for s in splits:
                row[f"split{s}"] = time_kernel(split_k(s), x, ws, args.replays)
            entry["time"][m] = row
        del ws
        torch.cuda.empty_cache()
        result["shapes"][shape] = entry
        print(f"[{time.time() - t0:.0f}s] {shape}", flush=True)
    result["seconds"] = time.time() - t0
    (args.out / "splitk_study.json").write_text(json.dumps(result, indent=1))
    (args.out / "splitk_study.md").write_text(summary(result))
    print(summary(result))


def summary(result: dict) -> str:
    """Per shape and M: each split's median over cuBLAS's, and the mode's; rows checked."""
    splits = result["splits"]
    lines = [
        "| shape | M | floor us | cuBLAS us | mode/cuBLAS | "
        + " | ".join(f"split {s}/cuBLAS" for s in splits)
        + " |",
        "|---" * (5 + len(splits)) + "|",
    ]
    verdicts = []
    for shape, entry in result["shapes"].items():
        for m, row in entry["time"].items():
            cublas = row["cublas"]["median_us"]
            ratios = [row[f"split{s}"]["median_us"] / cublas for s in splits]
            lines.append(
                f"| {shape} | {m} | {row['floor_us']:.2f} | {cublas:.2f} | "
                f"{row['mode']['median_us'] / cublas:.2f} | "
                + " | ".join(f"{r:.2f}" for r in ratios)
                + " |"
            )
        for s in splits:
            bad = entry["bits"][s]
            verdict = "every M from 1 to 512 equal" if not bad else f"differ at M = {bad[:8]}"
            verdicts.append(f"- {shape}, split {s}: rows vs a 64-row tile's product: {verdict}")
    return "\n".join(lines + [""] + verdicts) + "\n"


if __name__ == "__main__":
    main()
