"""Issue #24, second GEMM run: tile sweep of the streaming kernel at decode/verify sizes.

``gemm_study.py`` showed that every tile of a one-tile-per-program Triton GEMM (BM 16..128,
mma.sync or wgmma, pointer or TMA loads) gives the persistent matmul's bits at every M, and
which tiles come near cuBLAS. This run sweeps the tiles that can close the rest of the gap:
small BM (16, 32) with small BN (16..64) for the N = 5120 shapes, few warps, more stages,
and the grid order (M tiles of one N tile next to each other, so they share its weight in
L2). For every (shape, M) it times cuBLAS and every config (CUDA graphs, cold weights, as in
``gemm_study``), and checks each config's bits against the persistent kernel at M = 1, 13,
64 and 100. Then fp16 and fp32 bits (the mode's other GEMM dtypes) over M = 1..--max-m,
and FP8 block GEMMs (``gemm_study.fp8_block``).

Usage: python gemm_sweep.py --tree TREE --out DIR
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # gpu_common
from gemm_study import fp8_block, load_persistent, tma  # noqa: E402

import gpu_common  # noqa: E402
from gpu_common import SHAPES, bits, time_kernel  # noqa: E402


@triton.jit(do_not_specialize=["M"])
def tile_kernel(
    a_ptr, w_ptr, c_ptr, M, N, K, stride_am, stride_wn, stride_cm,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, M_FAST: tl.constexpr,
):  # fmt: skip
    """C = A @ W^T, one (BM, BN) tile per program, K from 0 in BK steps."""
    if M_FAST:
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
    else:
        pid_n = tl.program_id(0)
        pid_m = tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    rows = tl.where(offs_m < M, offs_m, 0)
    cols = tl.where(offs_n < N, offs_n, 0)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, tl.cdiv(K, BK)):
        kk = k0 * BK + offs_k
        a = tl.load(
            a_ptr + rows[:, None] * stride_am + kk[None, :], mask=kk[None, :] < K, other=0.0
        )
        w = tl.load(
            w_ptr + cols[None, :] * stride_wn + kk[:, None], mask=kk[:, None] < K, other=0.0
        )
        acc = tl.dot(a, w, acc)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    c = acc.to(c_ptr.dtype.element_ty)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], c, mask=mask)


def tile(bm, bn, bk, warps, stages, m_fast):
    def run(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        n = w.shape[0]
        c = torch.empty(m, n, device=a.device, dtype=a.dtype)
        tm, tn = triton.cdiv(m, bm), triton.cdiv(n, bn)
        grid = (tm, tn) if m_fast else (tn, tm)
        tile_kernel[grid](
            a, w, c, m, n, k, a.stride(0), w.stride(0), c.stride(0),
            BM=bm, BN=bn, BK=bk, M_FAST=m_fast, num_warps=warps, num_stages=stages,
        )  # fmt: skip
        return c

    return run


def configs() -> dict[str, tuple]:
    out = {}
    for bn in (16, 32, 64):
        for bk in (128, 256):
            for warps in (1, 2, 4):
                for stages in (4, 6):
                    out[f"m16n{bn}k{bk}w{warps}s{stages}"] = (16, bn, bk, warps, stages, True)
    for bn in (32, 64, 128):
        for bk in (128, 256):
            for warps in (2, 4):
                out[f"m32n{bn}k{bk}w{warps}s4"] = (32, bn, bk, warps, 4, True)
    for bn in (32, 64, 128):
        for bk in (64, 128):
            for stages in (3, 4, 5):
                out[f"m64n{bn}k{bk}w4s{stages}"] = (64, bn, bk, 4, stages, True)
    out["m16n64k128w4s5-nfast"] = (16, 64, 128, 4, 5, False)  # gemm_study's s16x64x128
    return out


def fits(cfg, dtype_bytes=2) -> bool:
    bm, bn, bk, _, stages, _ = cfg
    return (bm + bn) * bk * dtype_bytes * stages <= 220 * 1024


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tree", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--time-m", default="1,4,8,16,24,32,48,64")
    p.add_argument("--replays", type=int, default=10)
    p.add_argument("--shapes", default=",".join(SHAPES))
    p.add_argument("--max-m", type=int, default=512)
    p.add_argument("--skip", default="")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    skip = set(args.skip.split(","))
    t0 = time.time()
    bw = gpu_common.copy_bandwidth()
    persistent = load_persistent(args.tree)
    cfgs = {k: v for k, v in configs().items() if fits(v)}
    refs = {"t64x128x128": tma((64, 128, 128, 4, 4)), "t64x64x128": tma((64, 64, 128, 4, 4))}
    result = {
        "env": gpu_common.gpu_env(copy_bandwidth_TBps=bw / 1e12),
        "configs": cfgs,
        "shapes": {},
    }
    ms = [int(m) for m in args.time_m.split(",")]
    for name in args.shapes.split(","):
        n, k = SHAPES[name]
        a, w = gpu_common.linear_operands(128, n, k)
        ref = persistent(a, w)
        entry = {"N": n, "K": k, "bits": {}, "time": {}}
        runs = {cname: tile(*cfg) for cname, cfg in cfgs.items()}
        for cname, run in runs.items():
            try:
                entry["bits"][cname] = bits(run, a, w, ref, [1, 13, 64, 100])
            except Exception as exc:
                entry["bits"][cname] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        ws = gpu_common.cold_weights(w)
        for m in ms:
            x = a[:m].contiguous()
            row = {"floor_us": (n * k * 2 + m * k * 2 + m * n * 2) / bw * 1e6}
            row["cublas"] = time_kernel(lambda x_, w_: torch.nn.functional.linear(x_, w_), x,
                                        ws, args.replays)  # fmt: skip
            for cname, run in {**refs, **runs}.items():
                if "error" in entry["bits"].get(cname, {}):
                    continue
                try:
                    row[cname] = time_kernel(run, x, ws, args.replays)["median_us"]
                except Exception as exc:
                    row[cname] = f"{type(exc).__name__}: {str(exc)[:120]}"
            entry["time"][m] = row
        del ws
        torch.cuda.empty_cache()
        result["shapes"][name] = entry
        print(f"[{time.time() - t0:.0f}s] {name}", flush=True)
        (args.out / "gemm_sweep.json").write_text(json.dumps(result, indent=1))
    if "dtypes" not in skip:
        all_m = list(range(1, args.max_m + 1))
        dt_cfgs = {
            "m16n32k128w4s3": (16, 32, 128, 4, 3, True),
            "m32n64k64w4s3": (32, 64, 64, 4, 3, True),
            "m64n64k64w4s2": (64, 64, 64, 4, 2, True),
        }
        for dt in (torch.float16, torch.float32):
            out = {}
            for name in ("27b.in_proj_ba", "27b.down", "27b.o_proj", "large.gate_up"):
                n, k = SHAPES[name]
                a, w = gpu_common.linear_operands(args.max_m, n, k, dt, seed=1)
                ref = persistent(a, w)
                out[name] = {"persistent": bits(persistent, a, w, ref, all_m)}
                for cname, cfg in dt_cfgs.items():
                    try:
                        out[name][cname] = bits(tile(*cfg), a, w, ref, all_m)
                    except Exception as exc:
                        out[name][cname] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            result[f"bits_{dt}"] = out
        print(f"[{time.time() - t0:.0f}s] dtypes", flush=True)
        (args.out / "gemm_sweep.json").write_text(json.dumps(result, indent=1))
    if "fp8" not in skip:
        try:
            result["fp8_block"] = fp8_block(
                args.tree, list(range(1, args.max_m + 1)), [1, 4, 16, 64, 256], bw, 10
            )
        except Exception as exc:
            result["fp8_block"] = {"error": f"{type(exc).__name__}: {str(exc)[:400]}"}
        print(f"[{time.time() - t0:.0f}s] fp8", flush=True)
    result["seconds"] = time.time() - t0
    (args.out / "gemm_sweep.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
