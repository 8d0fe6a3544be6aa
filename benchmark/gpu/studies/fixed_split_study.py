"""Issue #24's two misses, one candidate design: a K split fixed by the weight, run two ways.

The misses (``results/2026-12-05-h200-splitk-cost.md``):

- a verify of 64 requests with 3 drafts (256 rows) costs 1.10x the default step: at
  M = 256, patch 0009's tiles run the 27B's wide weights at 1.12-1.65x cuBLAS (o_proj,
  gate_up and down worst). A 128 x 128 tile gives down (5120 x 17408) 80 programs for
  132 SMs, and a tile may not split K (0009 keeps the persistent kernel's bits);
- patch 0012's split-K is 1.06x the persistent kernel it replaced at 8192 rows on
  in_proj_ba: its fp32 partials go through HBM (4 x M x N x 4 bytes, written and read).

The candidate: K cut into S splits fixed by the weight's shape (0012's rule: multiples of
256 columns), each split one fp32 accumulator over tl.dot chunks from its first column,
the partials added in split order. A row's bits then depend on S only, and the split can be
run two ways with the same bits:

- ``partials``: one program per (tile, split), fp32 partials to memory, an ordered reduce
  (the tree's 0012 kernels, ``_matmul_split_k_triton``, given this script's plan): S times
  the programs, for M where the tiles alone do not fill the GPU;
- ``segmented``: one program per tile that runs the splits one after another in registers,
  ``total = p0; total = total + p1; ...`` (this script's kernel): no partial traffic, for M
  where the tiles fill the GPU (prefill).

And, for the wide weights at S = 1 (the persistent kernel's bits, as 0009 keeps them), tiles
at 256 rows that 0009's sweep did not try (``few-rows``: the tree's 0009 kernel).

Measured per shape (bf16):

- bits: each candidate's rows at every M of ``CHECK_M`` against the first M rows of its
  reference at 8192 rows: for S > 1 the partials run with ``REFERENCE_TILE``, so equal rows
  mean neither M, the tile nor the way of running changes a row; for S = 1 the persistent
  kernel (0.5.23's mode);
- time: CUDA-graph replays, each call on its own copy of the weight (cold), median and
  p10-p90 (``gemm_study.time_kernel``), at M in ``TIME_M``, against cuBLAS, the tree's GEMM as
  batch-invariant mode dispatches it (0009 and 0012) and the persistent kernel alone, beside
  the floor (weight, activation and output bytes over the copy bandwidth of the same run).

Checked on CPU under the Triton interpreter (fp32, N 24 and 40, K 512 and 300, a granule of
64 columns; not GPU numerics): the segmented kernel's rows equal the tree's partials for S = 2
and 4 at M 1, 5, 17 and 37 and three tiles of one K chunk width (there, unlike on SM90, the
chunk width changes bits: the interpreter's tl.dot sums a chunk in numpy's order); S = 2's
rows differ from S = 4's.

Usage: python fixed_split_study.py --tree TREE --out DIR [--shapes A,B] [--replays 10]
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # gpu_common
import gpu_common  # noqa: E402
from gpu_common import SHAPES, time_kernel  # noqa: E402

# The 27B's weights where 0009's tiles miss at 256 rows, then 0012's narrow one, then the
# two wide ones that were closer (1.12-1.18x at 256 rows), then the harness's down projection
# (1024 x 3072: 1.26x cuBLAS at 64 rows on triton 3.8, 32 programs of 32 columns). lm_head
# (1940 column tiles of 128) fills the GPU without a split.
STUDY_SHAPES = [
    "27b.down",
    "27b.gate_up",
    "27b.o_proj",
    "27b.in_proj_ba",
    "27b.qkv_gate",
    "27b.in_proj_qkvz",
    "large.down",
]
# How many of each GEMM one forward of the 27B runs (48 GDN layers: in_proj_qkvz, in_proj_ba,
# out_proj of o_proj's shape; 16 attention layers: qkv_gate, o_proj; 64 MLPs), lm_head aside
PER_FORWARD = {
    "27b.in_proj_qkvz": 48,
    "27b.in_proj_ba": 48,
    "27b.o_proj": 64,
    "27b.qkv_gate": 16,
    "27b.gate_up": 64,
    "27b.down": 64,
}
NARROW = 256  # 0012's widest split weight: its plan fixes S = 4
WIDE_SPLITS = [2, 4]
GRANULE = 256  # 0012's SPLIT_K_GRANULE: a split is a multiple of this many columns
TIME_M = [64, 128, 256, 1024, 4096, 8192]
CHECK_M = [1, 2, 3, 13, 64, 100, 128, 129, 256, 300, 512, 1024, 4096, 8192]
REFERENCE_M = 8192

# (BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, num_warps, num_stages)
REFERENCE_TILE = (64, 128, 64, 4, 3)
# S = 1 at 256 rows, wide weights: smaller K chunks and fewer stages, so that two or three
# programs share an SM, beside 0009's (128, 128, 64/128, 8, 3)
FEW_ROWS_256 = [
    (64, 128, 64, 4, 3),
    (64, 64, 64, 4, 4),
    (128, 64, 64, 4, 3),
    (64, 128, 128, 4, 3),
    (64, 256, 64, 8, 3),
    (128, 128, 64, 8, 4),
]
PARTIAL_TILES = {  # by M, wide weights
    64: [(64, 128, 128, 4, 4), (64, 64, 128, 4, 5), (32, 64, 256, 2, 4)],
    128: [(64, 128, 128, 4, 4), (128, 128, 64, 8, 3)],
    256: [(128, 128, 64, 8, 3), (64, 128, 64, 4, 4), (64, 128, 128, 4, 4)],
}
SEGMENTED_TILES = [
    (128, 128, 64, 8, 3),
    (64, 128, 64, 4, 4),
    (128, 64, 64, 4, 4),
    (64, 256, 64, 8, 3),
]
# the narrow weight above 256 rows: 0012's tile, the standalone study's, and larger ones
NARROW_PREFILL_TILES = [
    (64, 128, 64, 4, 3),
    (64, 128, 64, 4, 5),
    (64, 32, 256, 4, 3),
    (128, 32, 128, 4, 3),
    (128, 128, 64, 8, 3),
    (128, 128, 128, 8, 3),
]


@triton.jit(do_not_specialize=["M"])
def segmented_split_k_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, K_PER_SPLIT,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    SPLITS: tl.constexpr, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
):  # fmt: skip
    """The splits of one output tile in order, in registers: the tree's split-K kernel's
    partials (same loads, masks and tl.dot chunks from each split's first column) added as
    its reduce kernel adds them, ``((p0 + p1) + p2) + ...``, then cast."""
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    offs_am = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_bn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    row_ok = offs_am < M
    col_ok = offs_bn < N
    offs_bn_load = tl.where(col_ok, offs_bn, 0)
    total = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for split in tl.static_range(SPLITS):
        k_begin = split * K_PER_SPLIT
        accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for k0 in range(0, K_PER_SPLIT, BLOCK_SIZE_K):
            offs_k = k_begin + k0 + tl.arange(0, BLOCK_SIZE_K)
            k_ok = offs_k < K
            a = tl.load(
                a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak,
                mask=row_ok[:, None] & k_ok[None, :],
                other=0.0,
            )
            b = tl.load(
                b_ptr + offs_k[:, None] * stride_bk + offs_bn_load[None, :] * stride_bn,
                mask=k_ok[:, None],
                other=0.0,
            )
            accumulator = tl.dot(a, b, accumulator)
        if split == 0:
            total = accumulator  # the reduce kernel starts from partial 0, not from 0.0
        else:
            total = total + accumulator
    c = total.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + offs_am[:, None] * stride_cm + offs_bn[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=row_ok[:, None] & col_ok[None, :])


def k_per_split(k: int, splits: int) -> int:
    """0012's rule: K cut into ``splits`` splits of a multiple of GRANULE columns."""
    return triton.cdiv(triton.cdiv(k, splits), GRANULE) * GRANULE


Run = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def segmented(splits: int, tile: tuple) -> Run:
    bm, bn, bk, warps, stages = tile

    def run(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        n = w.shape[0]
        b = w.t()
        c = torch.empty(m, n, device=a.device, dtype=a.dtype)
        per = k_per_split(k, splits)
        segmented_split_k_kernel[(triton.cdiv(m, bm), triton.cdiv(n, bn))](
            a, b, c, m, n, k, per,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            # as many splits as _matmul_split_k_triton launches for this K_PER_SPLIT
            SPLITS=triton.cdiv(k, per), BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk,
            num_warps=warps, num_stages=stages,
        )  # fmt: skip
        return c

    return run


def partials(bio, splits: int, tile: tuple) -> Run:
    """The tree's 0012 split-K (partials to memory, ordered reduce) with this plan."""

    def run(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        c = torch.empty(a.shape[0], w.shape[0], device=a.device, dtype=a.dtype)
        plan = (k_per_split(a.shape[1], splits), *tile)
        return bio._matmul_split_k_triton(a, w.t(), c, None, plan)

    return run


def few_rows(bio, tile: tuple) -> Run:
    """The tree's 0009 kernel at this tile: the persistent kernel's bits."""

    def run(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        c = torch.empty(a.shape[0], w.shape[0], device=a.device, dtype=a.dtype)
        return bio._matmul_few_rows_triton(a, w.t(), c, None, tile)

    return run


def name(tile: tuple) -> str:
    return "m{}n{}k{}w{}s{}".format(*tile)


def candidates(bio, n: int, m: int) -> dict[str, tuple[int, Run]]:
    """name: (S, run) of the candidates timed at M = m for a weight of n columns."""
    out: dict[str, tuple[int, Run]] = {}
    if n <= NARROW:  # 0012 serves it with S = 4 at every M: the way of running and the tile
        if m > 128:
            for tile in NARROW_PREFILL_TILES:
                out[f"segmented S4 {name(tile)}"] = (4, segmented(4, tile))
        if m > 256:
            for tile in NARROW_PREFILL_TILES:
                out[f"partials S4 {name(tile)}"] = (4, partials(bio, 4, tile))
        return out
    if m == 256:
        for tile in FEW_ROWS_256:
            out[f"few-rows S1 {name(tile)}"] = (1, few_rows(bio, tile))
    for s in WIDE_SPLITS:
        for tile in PARTIAL_TILES.get(m, []):
            out[f"partials S{s} {name(tile)}"] = (s, partials(bio, s, tile))
        if m >= 256:
            for tile in SEGMENTED_TILES:
                out[f"segmented S{s} {name(tile)}"] = (s, segmented(s, tile))
    return out


def rows_differ(run: Run, a: torch.Tensor, w: torch.Tensor, ref: torch.Tensor) -> list[int]:
    """The M of CHECK_M whose rows differ from the reference's first M rows."""
    return [m for m in CHECK_M if not torch.equal(run(a[:m], w), ref[:m])]


def main() -> None:
    args = gpu_common.study_args(STUDY_SHAPES)

    bio = gpu_common.tree_batch_invariant_ops(args.tree)
    dispatched = gpu_common.dispatched_gemm(bio)

    def persistent(a, w):  # 0.5.23's mode: 0009's and 0012's switches off
        saved = (bio._ENABLE_MM_FEW_ROWS, bio._ENABLE_MM_SPLIT_K)
        bio._ENABLE_MM_FEW_ROWS = bio._ENABLE_MM_SPLIT_K = False
        try:
            return bio._matmul_persistent_triton(a, w.t(), out_dtype=a.dtype)
        finally:
            bio._ENABLE_MM_FEW_ROWS, bio._ENABLE_MM_SPLIT_K = saved

    t0 = time.time()
    bw = gpu_common.copy_bandwidth()
    result = {"env": gpu_common.gpu_env(copy_bandwidth_TBps=bw / 1e12), "shapes": {}}
    for shape in args.shapes.split(","):
        n, k = SHAPES[shape]
        a, w = gpu_common.linear_operands(REFERENCE_M, n, k)
        timed = {m: candidates(bio, n, m) for m in TIME_M}
        splits_used = sorted({s for cands in timed.values() for s, _ in cands.values()})
        refs = {
            s: persistent(a, w) if s == 1 else partials(bio, s, REFERENCE_TILE)(a, w)
            for s in splits_used
        }
        entry: dict = {"N": n, "K": k, "bits": {}, "time": {}}
        entry["bits"]["dispatched vs S4"] = (
            rows_differ(dispatched, a, w, refs[4]) if n <= NARROW else None
        )
        for label, (s, run) in {
            lbl: c for cands in timed.values() for lbl, c in cands.items()
        }.items():
            try:
                entry["bits"][label] = rows_differ(run, a, w, refs[s])
            except Exception as exc:  # a tile that does not compile or launch: recorded
                entry["bits"][label] = {"error": f"{type(exc).__name__}: {str(exc)[:160]}"}
        del refs
        ws = gpu_common.cold_weights(w)
        for m in TIME_M:
            x = a[:m].contiguous()
            row = {
                "floor_us": (n * k * 2 + m * k * 2 + m * n * 2) / bw * 1e6,
                "cublas": time_kernel(torch.nn.functional.linear, x, ws, args.replays),
                "dispatched": time_kernel(dispatched, x, ws, args.replays),
                "persistent": time_kernel(persistent, x, ws, args.replays),
            }
            for label, (_, run) in timed[m].items():
                if isinstance(entry["bits"][label], list):
                    row[label] = time_kernel(run, x, ws, args.replays)
            entry["time"][m] = row
            torch.cuda.empty_cache()
        del ws
        torch.cuda.empty_cache()
        result["shapes"][shape] = entry
        result["seconds"] = time.time() - t0
        print(f"[{time.time() - t0:.0f}s] {shape}", flush=True)
        (args.out / "fixed_split_study.json").write_text(json.dumps(result, indent=1))
        (args.out / "fixed_split_study.md").write_text(summary(result))
    print(summary(result))


def summary(result: dict) -> str:
    """Per shape and M: the floor, cuBLAS, the mode as dispatched, the persistent kernel,
    and the fastest candidate of each kind and S whose rows equal its reference at every M
    checked; then the candidates whose rows differ."""
    env = result["env"]
    lines = [
        gpu_common.env_line(env),
        "",
        "| shape | M | floor us | cuBLAS us | dispatched / cuBLAS | persistent / cuBLAS | "
        "fastest exact candidate per kind and S: us (/ cuBLAS, / dispatched) |",
        "|---|---|---|---|---|---|---|",
    ]
    differ = []
    best_exact: dict[tuple[str, int], float] = {}  # (shape, M): the fastest exact candidate's us
    for shape, e in result["shapes"].items():
        bad = {lbl for lbl, b in e["bits"].items() if b and lbl != "dispatched vs S4"}
        differ += [f"- {shape}: {lbl}: {e['bits'][lbl]}" for lbl in sorted(bad)]
        if e["bits"]["dispatched vs S4"]:
            differ.append(f"- {shape}: the dispatched GEMM vs S4: {e['bits']['dispatched vs S4']}")
        for m, row in e["time"].items():
            cub, disp = row["cublas"]["median_us"], row["dispatched"]["median_us"]
            best = gpu_common.fastest_per_kind(row, {"cublas", "dispatched", "persistent"} | bad)
            if best:
                best_exact[shape, m] = min(us for us, _ in best.values())
            cells = gpu_common.candidate_cells(best, cub, disp)
            lines.append(
                f"| {shape} | {m} | {row['floor_us']:.1f} | {cub:.1f} | {disp / cub:.2f} | "
                f"{row['persistent']['median_us'] / cub:.2f} | {cells or '-'} |"
            )
    lines += [
        "",
        *gpu_common.forward_estimate(result["shapes"], best_exact, PER_FORWARD, TIME_M, "lm_head"),
    ]
    lines += ["", "Rows that differ from the reference (M):", *(differ or ["- none"])]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
