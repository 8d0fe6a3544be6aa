"""Issue #24: patch 0009's few-rows GEMM, from a patched tree, against cuBLAS and the
persistent kernel.

``--sweep``: time the tree's ``matmul_kernel_few_rows`` with candidate tiles (and what
``_few_rows_tile`` picks) at every shape of ``gpu_common.SHAPES`` and M up to 256, and
check each tile's bits against the persistent kernel at M = 1, 13, 64, 100, 256.
``--grid SHAPE,...``: as ``--sweep``, at the named shapes only, over a grid of tiles
(rows, columns, K chunk, warps, stages) for the shapes that miss the goal (16-column tiles
for weights of at most 256 columns; 16-row tiles up to 16 rows), with K chunks up to 1024.
``--table``: the issue's GEMM table: per shape and M in 1, 4, 16, 64, 256 (and 1024,
4096, 8192 for weights of at most 256 columns, which patch 0012's split-K serves at every
M), the time of batch-invariant mode's GEMM as the tree dispatches it
(``_matmul_persistent_triton``), of cuBLAS and of the persistent kernel alone (0.5.23's
mode: the few-rows and split-K switches off), with the floor (weight, activation and
output bytes over the copy bandwidth measured in the same run); the dispatched rows at
M = 1..512 against its 512-row product (M-invariance) and against the persistent kernel's.

Timing as in ``gemm_study``: CUDA-graph replays, each call on its own copy of the weight
(cold), median and p10-p90.

Patch 0012's split-K above 256 rows: ``studies/fixed_split_study.py``.

Usage: python gemm_tiles.py --tree TREE --out DIR (--sweep | --grid SHAPES | --table)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_common  # noqa: E402
from gpu_common import SHAPES, bits, time_kernel  # noqa: E402

PREFILL_M = [1024, 4096, 8192]  # --table: weights of at most 256 columns

# (BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, num_warps, num_stages), by the rows they serve
SMALL = [
    (16, 64, 128, 2, 4),
    (16, 32, 256, 2, 4),
    (16, 16, 256, 2, 6),
    (16, 64, 256, 2, 4),
]
MID = [
    (32, 64, 128, 2, 4),
    (32, 64, 256, 4, 4),
    (32, 32, 256, 2, 4),
    (32, 128, 128, 4, 4),
]
WIDE = [
    (64, 128, 128, 4, 4),
    (64, 64, 128, 4, 5),
    (64, 32, 128, 4, 5),
    (64, 64, 256, 4, 3),
]
LARGE = [
    (64, 128, 128, 4, 4),
    (128, 64, 128, 8, 3),
    (128, 128, 64, 8, 3),
    (128, 128, 128, 8, 3),
    (128, 256, 64, 8, 3),
    (64, 256, 64, 4, 3),
    (128, 64, 64, 4, 4),
    (64, 64, 128, 4, 5),
]


def candidates(m: int) -> list[tuple]:
    if m <= 16:
        return SMALL
    if m <= 32:
        return MID + SMALL[:2]
    if m <= 64:
        return WIDE + MID[:2]
    return LARGE


SMEM_BUDGET = 200 * 1024  # 0009's _SMEM_BUDGET


def grid_candidates(n: int, k: int, m: int) -> list[tuple]:
    """Every tile of the grid that fits shared memory and the weight, for M = m."""
    if n <= 256:
        rows, cols, chunks = (
            [16] + ([32, 64] if m > 16 else []),
            [16, 32],
            [256, 512, 1024],
        )
        warps, stages = [2, 4, 8], [2, 3, 4, 6]
    else:
        rows, cols, chunks = [16], [32, 64, 128], [128, 256]
        warps, stages = [2, 4], [3, 4, 6]
    return [
        (bm, bn, bk, w, s)
        for bm in rows
        for bn in cols
        for bk in chunks
        for w in warps
        for s in stages
        if k % bk == 0 and (bm + bn) * bk * 2 * s <= SMEM_BUDGET
    ]


def name(tile: tuple) -> str:
    return "m{}n{}k{}w{}s{}".format(*tile)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tree", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--sweep", action="store_true")
    mode.add_argument("--grid", help="comma-separated shape names of gpu_common.SHAPES")
    mode.add_argument("--table", action="store_true")
    p.add_argument("--replays", type=int, default=10)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    bio = gpu_common.tree_batch_invariant_ops(args.tree)
    dispatched = gpu_common.dispatched_gemm(bio)

    def persistent(a, w):
        # 0009 and 0012 read SGLANG_BATCH_INVARIANT_OPS_ENABLE_MM_{FEW_ROWS,SPLIT_K} once,
        # into these switches (the 2026-12-04 runs ran 0009's first version, which read
        # the variable per call; trees without 0012 have no split-K switch).
        switches = [s for s in ("_ENABLE_MM_FEW_ROWS", "_ENABLE_MM_SPLIT_K") if hasattr(bio, s)]
        saved = {s: getattr(bio, s) for s in switches}
        try:
            for s in switches:
                setattr(bio, s, False)
            return bio._matmul_persistent_triton(a, w.t(), out_dtype=a.dtype)
        finally:
            for s, v in saved.items():
                setattr(bio, s, v)

    def route(x, w):  # what the tree dispatches at this M
        m, (n, k) = x.shape[0], w.shape
        plan = getattr(bio, "_split_k_plan", lambda *_: None)(x, m, n, k)
        if plan is not None:
            return f"split-K {name(plan[1:])}"
        rule = bio._few_rows_tile(x, m, n, k)
        return "persistent" if rule is None else name(rule)

    def tile_run(tile):
        def run(a, w):
            c = torch.empty(a.shape[0], w.shape[0], device=a.device, dtype=a.dtype)
            return bio._matmul_few_rows_triton(a, w.t(), c, None, tile)

        return run

    t0 = time.time()
    bw = gpu_common.copy_bandwidth()
    result = {"env": gpu_common.gpu_env(copy_bandwidth_TBps=bw / 1e12), "shapes": {}}
    ms = (
        [1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256]
        if args.sweep
        else [1, 4, 16, 64]
        if args.grid
        else [1, 4, 16, 64, 256]
    )
    shapes = SHAPES
    if args.grid:
        shapes = {s: SHAPES[s] for s in args.grid.split(",")}
    tiled = args.sweep or args.grid
    for shape, (n, k) in shapes.items():
        shape_ms = ms + PREFILL_M if args.table and n <= 256 else ms
        a, w = gpu_common.linear_operands(max(512, *shape_ms), n, k)
        ref = persistent(a, w)
        entry = {"N": n, "K": k, "bits": {}, "time": {}}
        if args.grid:
            pick = {m: grid_candidates(n, k, m) for m in ms}
        else:
            pick = {m: candidates(m) for m in ms}
        if tiled:
            tiles = {t for m in ms for t in pick[m]}
            for tile in sorted(tiles):
                try:
                    entry["bits"][name(tile)] = bits(
                        tile_run(tile), a, w, ref, [1, 13, 64, 100, 256]
                    )
                except Exception as exc:
                    entry["bits"][name(tile)] = {"error": f"{type(exc).__name__}: {str(exc)[:160]}"}
        else:
            entry["bits"]["dispatched"] = bits(dispatched, a, w, ref, list(range(1, 257)))
            own = dispatched(a[:512], w)
            entry["bits"]["invariant"] = bits(dispatched, a, w, own, list(range(1, 513)))
        ws = gpu_common.cold_weights(w)
        for m in shape_ms:
            x = a[:m].contiguous()
            row = {
                "floor_us": (n * k * 2 + m * k * 2 + m * n * 2) / bw * 1e6,
                "rule": route(x, w),
                "cublas": time_kernel(
                    lambda x_, w_: torch.nn.functional.linear(x_, w_), x, ws, args.replays
                ),  # fmt: skip
                "persistent": time_kernel(persistent, x, ws, args.replays),
            }
            if tiled:
                for tile in pick[m]:
                    if "error" not in entry["bits"].get(name(tile), {}):
                        row[name(tile)] = time_kernel(tile_run(tile), x, ws, args.replays)
            else:
                row["dispatched"] = time_kernel(dispatched, x, ws, args.replays)
            entry["time"][m] = row
        del ws
        torch.cuda.empty_cache()
        result["shapes"][shape] = entry
        print(f"[{time.time() - t0:.0f}s] {shape}", flush=True)
        out = "gemm_tiles_sweep" if args.sweep else "gemm_tiles_grid" if args.grid else "gemm_table"
        (args.out / f"{out}.json").write_text(json.dumps(result, indent=1))
    if args.table:
        (args.out / "gemm_table.md").write_text(table(result))
        print(table(result))
    if args.grid:
        (args.out / f"{out}.md").write_text(best(result))
        print(best(result))


def best(result: dict) -> str:
    """Per shape and M: cuBLAS, the rule's tile, and the five fastest tiles whose bits are
    the persistent kernel's."""
    env = result["env"]
    lines = [
        gpu_common.env_line(env),
        "",
        "| shape | M | floor us | cuBLAS us | persistent us | rule | fastest tiles with "
        "the persistent kernel's bits (us, / cuBLAS) | tiles timed | "
        "tiles whose bits differ |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for shape, e in result["shapes"].items():
        differ = sorted(t for t, b in e["bits"].items() if "error" in b or b["differ_ref"])
        for m, row in e["time"].items():
            c = row["cublas"]["median_us"]
            timed = {
                t: v["median_us"]
                for t, v in row.items()
                if t.startswith("m") and isinstance(v, dict) and t not in differ
            }
            top = sorted(timed.items(), key=lambda kv: kv[1])[:5]
            lines.append(
                f"| {shape} | {m} | {row['floor_us']:.1f} | {c:.1f} | "
                f"{row['persistent']['median_us']:.1f} | {row['rule']} | "
                + ", ".join(f"{t} {v:.1f} ({v / c:.2f})" for t, v in top)
                + f" | {len(timed)} | {', '.join(differ) or 'none'} |"
            )
    return "\n".join(lines) + "\n"


def table(result: dict) -> str:
    env = result["env"]
    lines = [
        gpu_common.env_line(env),
        "",
        "| shape (N x K) | M | floor us | mode's GEMM us (p10-p90) | tile | cuBLAS us | "
        "persistent us | mode / cuBLAS | persistent / cuBLAS | bits = persistent, M 1..256 | "
        "rows at M 1..512 = M 512's |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for shape, e in result["shapes"].items():
        b = e["bits"]["dispatched"]
        same = "yes" if not b["differ_ref"] else f"no: M {b['differ_ref'][:5]}"
        inv = e["bits"].get("invariant")  # absent from tables of earlier runs
        if inv is None:
            invariant = "-"
        elif inv["differ_ref"]:
            invariant = f"**no**: M {inv['differ_ref'][:5]}"
        else:
            invariant = "yes"
        for m, row in e["time"].items():
            d, c, p = row["dispatched"], row["cublas"], row["persistent"]
            lines.append(
                f"| {shape} ({e['N']} x {e['K']}) | {m} | {row['floor_us']:.1f} | "
                f"{d['median_us']:.1f} ({d['p10_us']:.1f}-{d['p90_us']:.1f}) | {row['rule']} | "
                f"{c['median_us']:.1f} | {p['median_us']:.1f} | "
                f"{d['median_us'] / c['median_us']:.2f} | {p['median_us'] / c['median_us']:.2f} | "
                f"{same} | {invariant} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
