"""Issue #24, patch 0011: tiles for the split-K kernel above 256 rows (prefill), from a
patched tree, at Qwen3.5-27B's in_proj_ba (96 x 5120): time at M = 1024, 4096, 8192
against cuBLAS and the persistent kernel (0.5.23's mode), and each tile's rows against
the tree's own plan at the same M (a tile must not change a row's bits).

Usage: python splitk_prefill_tiles.py --tree TREE --out DIR
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gemm_study import time_kernel  # noqa: E402

from gpu_common import copy_bandwidth, gpu_env  # noqa: E402

TILES = [  # (BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, num_warps, num_stages)
    (64, 128, 64, 4, 3),
    (64, 32, 256, 4, 3),
    (64, 128, 128, 4, 3),
    (128, 128, 64, 8, 3),
    (128, 128, 128, 8, 3),
    (128, 128, 64, 4, 3),
    (64, 64, 256, 4, 3),
    (128, 64, 128, 8, 3),
    (32, 128, 256, 4, 3),
]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tree", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from gdn_parity.sandbox.bare_import import import_sglang_from

    import_sglang_from(args.tree)
    from sglang.srt.batch_invariant_ops import batch_invariant_ops as bio

    n, k = 96, 5120
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(8192, k, device="cuda", generator=gen).to(torch.bfloat16)
    w = (torch.randn(n, k, device="cuda", generator=gen) / math.sqrt(k)).to(torch.bfloat16)
    ws = [w] + [w.clone() for _ in range(199)]
    bw = copy_bandwidth()

    def plan_run(tile):
        def run(x, w_):
            plan = bio._split_k_plan(x, x.shape[0], n, k)
            c = torch.empty(x.shape[0], n, device=x.device, dtype=x.dtype)
            return bio._matmul_split_k_triton(x, w_.t(), c, None, (plan[0], *tile))

        return run

    def persistent(x, w_):  # 0.5.23's mode: both switches off
        saved = bio._ENABLE_MM_SPLIT_K, bio._ENABLE_MM_FEW_ROWS
        bio._ENABLE_MM_SPLIT_K, bio._ENABLE_MM_FEW_ROWS = False, False
        try:
            return bio._matmul_persistent_triton(x, w_.t(), out_dtype=x.dtype)
        finally:
            bio._ENABLE_MM_SPLIT_K, bio._ENABLE_MM_FEW_ROWS = saved

    def dispatched(x, w_):
        return bio._matmul_persistent_triton(x, w_.t(), out_dtype=x.dtype)

    result = {"env": gpu_env(copy_bandwidth_TBps=bw / 1e12), "rows": []}
    lines = [
        "| M | floor us | cuBLAS us | persistent us | tile | us | / cuBLAS | / persistent "
        "| rows = plan's |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for m in (1024, 4096, 8192):
        x = a[:m].contiguous()
        ref = dispatched(x, w)
        cublas = time_kernel(torch.nn.functional.linear, x, ws, 10)["median_us"]
        pers = time_kernel(persistent, x, ws, 10)["median_us"]
        floor = (n * k * 2 + m * k * 2 + m * n * 2) / bw * 1e6
        for tile in TILES:
            try:
                same = torch.equal(plan_run(tile)(x, w), ref)
                us = time_kernel(plan_run(tile), x, ws, 10)["median_us"]
            except Exception as exc:  # a tile that does not compile or fit
                lines.append(f"| {m} | | | | {tile} | error: {type(exc).__name__} | | | |")
                continue
            result["rows"].append(
                {
                    "M": m,
                    "tile": tile,
                    "us": us,
                    "cublas": cublas,
                    "persistent": pers,
                    "same": same,
                }
            )
            lines.append(
                f"| {m} | {floor:.1f} | {cublas:.1f} | {pers:.1f} | {tile} | {us:.1f} | "
                f"{us / cublas:.2f} | {us / pers:.2f} | {same} |"
            )
    (args.out / "splitk_prefill_tiles.json").write_text(json.dumps(result, indent=1))
    text = f"{result['env']}\n\n" + "\n".join(lines) + "\n"
    (args.out / "splitk_prefill_tiles.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
