"""Issue #24's last step miss: the wide weights at verify sizes, with TMA loads.

The miss (``results/2026-12-05-h200-splitk-cost.md``): a verify of 64 requests with 3 drafts
(256 rows) costs 1.101x the default step. At M = 256, patch 0008's tiles (pointer loads, one
128 x 128 tile per program) run the 27B's wide weights at 1.13-1.62x cuBLAS on the H200 and
1.32-1.39x on the H100 (down, o_proj, gate_up). ``fixed_split_study.py`` showed that a K split
fixed by the weight does not help there, and that 0008's kernel at other tiles gains at most 4%.

What is left inside 0008's arithmetic (one fp32 accumulator per output element, tl.dot chunks
of K in order from k = 0: ``gemm_study.py`` found every tile and TMA loads give those bits) is
how fast one SM runs a tile. This study times, at the verify sizes above 64 rows:

- ``tma``: one output tile per program, A and W read through TMA descriptors (host-made);
- ``tma-persistent``: one program per SM looping over the tiles (triton's persistent TMA
  matmul, ``tl.range(..., flatten=True)``), and for the 4-warp tiles ``-ws``: the loop not
  flattened and warp-specialized (triton 3.6 specializes those, not the 8-warp ones);

against cuBLAS, the tree's GEMM as batch-invariant mode dispatches it (0008) and the floor.
Every candidate's rows at each M of ``CHECK_M`` are compared with ``torch.equal`` to the first M
rows of the dispatched GEMM at 512 rows (itself the persistent kernel's bits at every M, which
0008's CUDA test checks): a candidate that differs anywhere is reported and not timed.

Usage: python tma_tile_study.py --tree TREE --out DIR [--shapes A,B] [--replays 10]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fixed_split_study import PER_FORWARD as SPLIT_PER_FORWARD  # noqa: E402
from gemm_study import SHAPES, time_kernel  # noqa: E402

import gpu_common  # noqa: E402

STUDY_SHAPES = [
    "27b.down",
    "27b.o_proj",
    "27b.gate_up",
    "27b.qkv_gate",
    "27b.in_proj_qkvz",
    "27b.lm_head",
]
# How many of each GEMM one forward of the 27B runs: fixed_split_study's (in_proj_ba aside), and
# lm_head
PER_FORWARD = {s: n for s, n in SPLIT_PER_FORWARD.items() if s != "27b.in_proj_ba"}
PER_FORWARD["27b.lm_head"] = 1
TIME_M = [128, 192, 256]
CHECK_M = [1, 13, 64, 100, 128, 129, 192, 256, 300, 512]
REFERENCE_M = 512

# (BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, num_warps, num_stages)
TMA_TILES = [
    (128, 128, 64, 8, 3),
    (128, 128, 64, 8, 4),
    (128, 128, 128, 8, 3),
    (128, 256, 64, 8, 3),
    (256, 128, 64, 8, 3),
    (128, 64, 64, 4, 4),
    (64, 128, 64, 4, 4),
    (64, 256, 64, 4, 3),
]
PERSISTENT_TILES = [
    (128, 128, 64, 8, 3),
    (128, 128, 64, 8, 4),
    (128, 256, 64, 8, 3),
    (128, 64, 64, 4, 4),
    (64, 128, 64, 4, 4),
]


@triton.jit
def output_tile(a_desc, w_desc, c_ptr, pid_m, pid_n, M, N, K, stride_cm, BM: tl.constexpr,
                BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
    """C's tile (pid_m, pid_n) = A @ W^T: K from 0 in BK chunks into one fp32 accumulator."""
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for ki in range(0, tl.cdiv(K, BK)):
        a = a_desc.load([pid_m * BM, ki * BK])
        w = w_desc.load([pid_n * BN, ki * BK])
        acc = tl.dot(a, w.T, acc)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :],
             acc.to(c_ptr.dtype.element_ty), mask=mask)  # fmt: skip


@triton.jit(do_not_specialize=["M"])  # one compile for every M, as 0008's kernel
def tma_tile_kernel(a_desc, w_desc, c_ptr, M, N, K, stride_cm, BM: tl.constexpr,
                    BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
    """One tile per program; the M tiles of one N tile are adjacent programs (as 0008's)."""
    output_tile(a_desc, w_desc, c_ptr, tl.program_id(0), tl.program_id(1), M, N, K, stride_cm,
                BM, BN, BK)  # fmt: skip


@triton.jit(do_not_specialize=["M"])
def tma_persistent_kernel(a_desc, w_desc, c_ptr, M, N, K, stride_cm, BM: tl.constexpr,
                          BN: tl.constexpr, BK: tl.constexpr, NUM_SMS: tl.constexpr,
                          WARP_SPECIALIZE: tl.constexpr):  # fmt: skip
    """The same tiles, one program per SM looping over them (M tiles of an N tile adjacent)."""
    num_pid_m = tl.cdiv(M, BM)
    num_tiles = num_pid_m * tl.cdiv(N, BN)
    # triton's tutorial 09: Hopper's warp specialization does not work with a flattened loop
    # (with both, triton 3.6 and 3.8 emit the plain kernel's PTX)
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=not WARP_SPECIALIZE,
                            warp_specialize=WARP_SPECIALIZE):  # fmt: skip
        output_tile(a_desc, w_desc, c_ptr, tile_id % num_pid_m, tile_id // num_pid_m, M, N, K,
                    stride_cm, BM, BN, BK)  # fmt: skip


Run = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def tma_tile(tile: tuple) -> Run:
    from triton.tools.tensor_descriptor import TensorDescriptor

    bm, bn, bk, warps, stages = tile

    def run(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        n = w.shape[0]
        c = torch.empty(m, n, device=a.device, dtype=a.dtype)
        tma_tile_kernel[(triton.cdiv(m, bm), triton.cdiv(n, bn))](
            TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(w, [bn, bk]),
            c, m, n, k, c.stride(0), BM=bm, BN=bn, BK=bk, num_warps=warps, num_stages=stages,
        )  # fmt: skip
        return c

    return run


def tma_persistent(tile: tuple, warp_specialize: bool) -> Run:
    from triton.tools.tensor_descriptor import TensorDescriptor

    bm, bn, bk, warps, stages = tile
    sms = torch.cuda.get_device_properties(0).multi_processor_count

    def run(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        n = w.shape[0]
        c = torch.empty(m, n, device=a.device, dtype=a.dtype)
        tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
        tma_persistent_kernel[(min(sms, tiles),)](
            TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(w, [bn, bk]),
            c, m, n, k, c.stride(0), BM=bm, BN=bn, BK=bk, NUM_SMS=sms,
            WARP_SPECIALIZE=warp_specialize, num_warps=warps, num_stages=stages,
        )  # fmt: skip
        return c

    return run


def name(tile: tuple) -> str:
    return "m{}n{}k{}w{}s{}".format(*tile)


def candidates() -> dict[str, Run]:
    out = {f"tma {name(t)}": tma_tile(t) for t in TMA_TILES}
    for t in PERSISTENT_TILES:
        out[f"tma-persistent {name(t)}"] = tma_persistent(t, False)
        if t[3] == 4:  # on triton 3.6 only 4-warp tiles are specialized (8-warp ones are not)
            out[f"tma-persistent-ws {name(t)}"] = tma_persistent(t, True)
    return out


def timed_or_error(run: Run, x: torch.Tensor, ws: list[torch.Tensor], replays: int) -> dict:
    """``time_kernel``'s result, or the error: one candidate that fails here is recorded."""
    try:
        return time_kernel(run, x, ws, replays)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}


def rows_differ(run: Run, a: torch.Tensor, w: torch.Tensor, ref: torch.Tensor) -> list[int]:
    return [m for m in CHECK_M if not torch.equal(run(a[:m].contiguous(), w), ref[:m])]


def main() -> None:
    args = gpu_common.study_args(STUDY_SHAPES)

    bio = gpu_common.tree_batch_invariant_ops(args.tree)
    dispatched = gpu_common.dispatched_gemm(bio)

    t0 = time.time()
    bw = gpu_common.copy_bandwidth()
    result = {"env": gpu_common.gpu_env(copy_bandwidth_TBps=bw / 1e12), "shapes": {}}
    cands = candidates()
    for shape in args.shapes.split(","):
        n, k = SHAPES[shape]
        a, w = gpu_common.linear_operands(REFERENCE_M, n, k)
        ref = dispatched(a, w)
        entry: dict = {"N": n, "K": k, "bits": {}, "time": {}}
        entry["bits"]["dispatched"] = rows_differ(dispatched, a, w, ref)
        for label, run in cands.items():
            try:
                entry["bits"][label] = rows_differ(run, a, w, ref)
            except Exception as exc:  # a tile that does not compile or launch: recorded
                entry["bits"][label] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        torch.cuda.synchronize()  # a candidate that broke the context ends the run here
        result["shapes"][shape] = entry
        (args.out / "tma_tile_study.json").write_text(json.dumps(result, indent=1))
        ws = gpu_common.cold_weights(w)
        for m in TIME_M:
            x = a[:m].contiguous()
            row = {
                "floor_us": (n * k * 2 + m * k * 2 + m * n * 2) / bw * 1e6,
                "cublas": time_kernel(torch.nn.functional.linear, x, ws, args.replays),
                "dispatched": time_kernel(dispatched, x, ws, args.replays),
            }
            for label, run in cands.items():
                if entry["bits"][label] == []:
                    row[label] = timed_or_error(run, x, ws, args.replays)
                    torch.cuda.synchronize()
            entry["time"][m] = row
            torch.cuda.empty_cache()
        del ws, ref
        torch.cuda.empty_cache()
        result["shapes"][shape] = entry
        result["seconds"] = time.time() - t0
        print(f"[{time.time() - t0:.0f}s] {shape}", flush=True)
        (args.out / "tma_tile_study.json").write_text(json.dumps(result, indent=1))
        (args.out / "tma_tile_study.md").write_text(summary(result))
    print(summary(result))


def summary(result: dict) -> str:
    """Per shape and M: floor, cuBLAS, the dispatched GEMM, the fastest exact candidate of each
    kind; then one forward's GEMMs; then the candidates whose rows differ or that failed."""
    env = result["env"]
    lines = [
        gpu_common.env_line(env),
        "",
        "| shape | M | floor us | cuBLAS us | dispatched us (/ cuBLAS) | fastest exact per kind: "
        "tile us (/ cuBLAS, / dispatched) |",
        "|---|---|---|---|---|---|",
    ]
    other = []
    best_exact: dict[tuple[str, int], float] = {}
    for shape, e in result["shapes"].items():
        other += [f"- {shape}: {lbl}: {b}" for lbl, b in e["bits"].items() if b != []]
        for m, row in e["time"].items():
            cub, disp = row["cublas"]["median_us"], row["dispatched"]["median_us"]
            other += [
                f"- {shape}: {lbl} at M = {m}, timing: {t['error']}"
                for lbl, t in row.items()
                if isinstance(t, dict) and "error" in t
            ]
            best = gpu_common.fastest_per_kind(row, {"cublas", "dispatched"})
            if best:
                best_exact[shape, m] = min(us for us, _ in best.values())
            cells = gpu_common.candidate_cells(best, cub, disp)
            lines.append(
                f"| {shape} | {m} | {row['floor_us']:.1f} | {cub:.1f} | {disp:.1f} "
                f"({disp / cub:.2f}) | {cells or '-'} |"
            )
    forward = gpu_common.forward_estimate(
        result["shapes"], best_exact, PER_FORWARD, TIME_M, "in_proj_ba"
    )
    lines += ["", *forward]
    lines += ["", "Rows that differ from the dispatched GEMM's (M), or errors:"]
    lines += other or ["- none"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
