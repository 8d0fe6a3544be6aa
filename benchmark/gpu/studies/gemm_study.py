"""Issue #24's GEMM design study: a row-invariant GEMM near cuBLAS at decode/verify sizes.

For each linear layer shape of a Qwen3.5-27B (and of the harness's 1024-wide model):

- bits: for every M in 1..--max-m, is each row of a kernel's output at M equal to the row
  of sglang's batch-invariant persistent matmul (0.5.23's ``_matmul_persistent_triton``) at
  M = --max-m? (``ref``), and is row 0 equal to the same kernel's row 0 at M = 1? (``self``);
- time: CUDA-graph replays of each kernel at M in --time-m, each call on its own copy of
  the weight (copies enough that the weights of one replay exceed 512 MiB: cold from HBM),
  median and p10-p90 over replays, beside the floor (weight + activation + output bytes /
  the device-to-device copy bandwidth measured in the same run).

Kernels: cuBLAS (``F.linear``), the persistent matmul, and candidate streaming kernels of this
script: one output tile per program (``stream``), the same with TMA loads (``tma``), and a
fixed split-K (``splitk``, timing only: its sum order is not the persistent kernel's).
Then FP8 block GEMMs (128x128 weight blocks, per-token-group activation quant) through
the two calls of sglang's ``triton_w8a8_block_fp8_linear``: bits over M, and time.

Usage: python gemm_study.py --tree TREE --out DIR  (TREE: a tree ``gdn-parity tree`` made)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # gpu_common
import gpu_common  # noqa: E402
from gpu_common import SHAPES, bits, time_kernel  # noqa: E402


@triton.jit
def stream_kernel(
    a_ptr, w_ptr, c_ptr, M, N, K,
    stride_am, stride_wn, stride_cm,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):  # fmt: skip
    """C[M, N] = A[M, K] @ W[N, K]^T, one tile per program, K from 0 in BK steps."""
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
    c = acc.to(c_ptr.dtype.element_ty)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], c, mask=mask)


@triton.jit
def tma_kernel(a_desc, w_desc, c_ptr, M, N, K, stride_cm, BM: tl.constexpr, BN: tl.constexpr,
               BK: tl.constexpr):  # fmt: skip
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, tl.cdiv(K, BK)):
        a = a_desc.load([pid_m * BM, k0 * BK])
        w = w_desc.load([pid_n * BN, k0 * BK])
        acc = tl.dot(a, w.T, acc)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    c = acc.to(c_ptr.dtype.element_ty)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], c, mask=mask)


@triton.jit
def splitk_kernel(
    a_ptr, w_ptr, p_ptr, M, N, K, stride_am, stride_wn, K_PER_SPLIT,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):  # fmt: skip
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    split = tl.program_id(2)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    rows = tl.where(offs_m < M, offs_m, 0)
    cols = tl.where(offs_n < N, offs_n, 0)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    k_begin = split * K_PER_SPLIT
    for k0 in range(0, tl.cdiv(K_PER_SPLIT, BK)):
        kk = k_begin + k0 * BK + offs_k
        a = tl.load(
            a_ptr + rows[:, None] * stride_am + kk[None, :], mask=kk[None, :] < K, other=0.0
        )
        w = tl.load(
            w_ptr + cols[None, :] * stride_wn + kk[:, None], mask=kk[:, None] < K, other=0.0
        )
        acc = tl.dot(a, w, acc)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    base = p_ptr + split * M * N
    tl.store(base + offs_m[:, None] * N + offs_n[None, :], acc, mask=mask)


@triton.jit
def splitk_reduce(p_ptr, c_ptr, MN, SPLITS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    acc = tl.load(p_ptr + offs, mask=mask, other=0.0)
    for s in tl.static_range(1, SPLITS):
        acc += tl.load(p_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)


# (BM, BN, BK, warps, stages)
STREAM = {
    "s64x64x128": (64, 64, 128, 4, 4),
    "s64x32x128": (64, 32, 128, 4, 5),
    "s64x128x128": (64, 128, 128, 4, 3),
    "s64x64x256": (64, 64, 256, 4, 3),
    "s64x128x64": (64, 128, 64, 4, 5),
    "s16x64x128": (16, 64, 128, 4, 5),
    "s128x64x128": (128, 64, 128, 8, 3),
    "s64x64x128w8": (64, 64, 128, 8, 4),
}
TMA = {
    "t64x64x128": (64, 64, 128, 4, 4),
    "t64x128x128": (64, 128, 128, 4, 4),
    "t64x32x256": (64, 32, 256, 4, 4),
    "t64x64x256": (64, 64, 256, 4, 3),
}
SPLITK = {"k4s64x64x128": (4, (64, 64, 128, 4, 4)), "k8s64x64x128": (8, (64, 64, 128, 4, 4))}
BITS_ALL_M = ("persistent", "cublas", "s64x64x128", "s16x64x128", "t64x64x128")


def stream(cfg):
    bm, bn, bk, warps, stages = cfg

    def run(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        n = w.shape[0]
        c = torch.empty(m, n, device=a.device, dtype=a.dtype)
        grid = (triton.cdiv(n, bn), triton.cdiv(m, bm))
        stream_kernel[grid](
            a, w, c, m, n, k, a.stride(0), w.stride(0), c.stride(0),
            BM=bm, BN=bn, BK=bk, num_warps=warps, num_stages=stages,
        )  # fmt: skip
        return c

    return run


def tma(cfg):
    from triton.tools.tensor_descriptor import TensorDescriptor

    bm, bn, bk, warps, stages = cfg

    def run(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        n = w.shape[0]
        c = torch.empty(m, n, device=a.device, dtype=a.dtype)
        a_desc = TensorDescriptor.from_tensor(a, [bm, bk])
        w_desc = TensorDescriptor.from_tensor(w, [bn, bk])
        grid = (triton.cdiv(n, bn), triton.cdiv(m, bm))
        tma_kernel[grid](
            a_desc, w_desc, c, m, n, k, c.stride(0), BM=bm, BN=bn, BK=bk,
            num_warps=warps, num_stages=stages,
        )  # fmt: skip
        return c

    return run


def splitk(splits, cfg):
    bm, bn, bk, warps, stages = cfg

    def run(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        n = w.shape[0]
        per = triton.cdiv(triton.cdiv(k, splits), bk) * bk
        p = torch.empty(splits, m, n, device=a.device, dtype=torch.float32)
        c = torch.empty(m, n, device=a.device, dtype=a.dtype)
        grid = (triton.cdiv(n, bn), triton.cdiv(m, bm), splits)
        splitk_kernel[grid](
            a, w, p, m, n, k, a.stride(0), w.stride(0), per, BM=bm, BN=bn, BK=bk,
            num_warps=warps, num_stages=stages,
        )  # fmt: skip
        splitk_reduce[(triton.cdiv(m * n, 1024),)](p, c, m * n, SPLITS=splits, BLOCK=1024)
        return c

    return run


def load_persistent(tree: Path) -> Callable:
    """0.5.23's ``_matmul_persistent_triton``, from the tree's base file (bare sglang import)."""
    return gpu_common.dispatched_gemm(gpu_common.tree_batch_invariant_ops(tree))


def kernels(tree: Path) -> dict[str, Callable]:
    out = {"cublas": lambda a, w: F.linear(a, w), "persistent": load_persistent(tree)}
    out.update({name: stream(cfg) for name, cfg in STREAM.items()})
    out.update({name: tma(cfg) for name, cfg in TMA.items()})
    out.update({name: splitk(s, cfg) for name, (s, cfg) in SPLITK.items()})
    return out


def dtype_bits(ks: dict, dtype: torch.dtype, shapes: list[str], ms: list[int]) -> dict:
    out = {}
    for name in shapes:
        n, k = SHAPES[name]
        a, w = gpu_common.linear_operands(max(ms), n, k, dtype, seed=1)
        ref = ks["persistent"](a, w)
        out[name] = {
            kname: bits(ks[kname], a, w, ref, ms)
            for kname in ("persistent", "cublas", "s64x64x128", "s16x64x128", "t64x64x128")
        }
    return out


def fp8_block(tree: Path, ms_bits: list[int], ms_time: list[int], bw: float, replays: int):
    """sglang's triton_w8a8_block_fp8_linear (H200 without DeepGEMM): bits over M, time."""
    from sglang.kernels.ops.gemm.fp8_kernel import w8a8_block_fp8_matmul_triton
    from sglang.kernels.ops.quantization import fp8_kernel as quant

    quantize, route = quant.per_token_group_quant_fp8, "per_token_group_quant_fp8"
    probe = torch.randn(2, 256, device="cuda", dtype=torch.bfloat16)
    try:
        quantize(probe, 128, column_major_scales=False)
    except Exception as exc:  # the CUDA JIT group quant needs a toolchain; the Triton one
        quantize = quant._per_token_group_quant_8bit_raw
        route = f"_per_token_group_quant_8bit_raw ({type(exc).__name__}: {str(exc)[:120]})"

    def triton_w8a8_block_fp8_linear(x, w, block, scale):
        """fp8_utils.triton_w8a8_block_fp8_linear's two calls (its module imports the
        whole quantization package)."""
        q, s = quantize(x, block[1], column_major_scales=False)
        return w8a8_block_fp8_matmul_triton(q, w, s, scale, block, output_dtype=x.dtype)

    out = {"route": route}
    for name in ("27b.in_proj_qkvz", "27b.qkv_gate", "27b.o_proj", "27b.gate_up", "27b.down"):
        n, k = SHAPES[name]
        gen = torch.Generator(device="cuda").manual_seed(2)
        w = (torch.randn(n, k, device="cuda", generator=gen) / math.sqrt(k)).to(torch.bfloat16)
        blocks = w.float().view(n // 128, 128, k // 128, 128).abs().amax(dim=(1, 3))
        scale = (blocks / 448.0).clamp(min=1e-12)
        wq = w.float().view(n // 128, 128, k // 128, 128) / scale[:, None, :, None]
        wq = wq.view(n, k).to(torch.float8_e4m3fn)
        a = torch.randn(max(ms_bits), k, device="cuda", generator=gen).to(torch.bfloat16)

        def run(x, w_=wq, s_=scale):
            return triton_w8a8_block_fp8_linear(x, w_, [128, 128], s_)

        ref = run(a)
        entry = {"bits": bits(lambda x, _w: run(x), a, None, ref, ms_bits), "time": {}}
        ws = gpu_common.cold_weights(wq)
        for m in ms_time:
            x = a[:m].contiguous()
            t = time_kernel(lambda x_, w_, s_=scale: run(x_, w_, s_), x, ws, replays)
            floor = (n * k + m * k * 2 + m * n * 2) / bw * 1e6
            entry["time"][m] = {**t, "floor_us": floor}
        out[name] = entry
        del ws
        torch.cuda.empty_cache()
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tree", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--max-m", type=int, default=512)
    p.add_argument("--time-m", default="1,2,4,8,16,32,64,128,256")
    p.add_argument("--replays", type=int, default=30)
    p.add_argument("--shapes", default=",".join(SHAPES))
    p.add_argument("--skip", default="")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    skip = set(args.skip.split(","))
    t0 = time.time()
    bw = gpu_common.copy_bandwidth()
    ks = kernels(args.tree)
    result = {"env": gpu_common.gpu_env(copy_bandwidth_TBps=bw / 1e12), "shapes": {}}
    time_ms = [int(m) for m in args.time_m.split(",")]
    all_m = list(range(1, args.max_m + 1))
    few_m = [1, 2, 3, 5, 8, 12, 13, 16, 17, 31, 64, 65, 100, 128, 200, 256, 333, args.max_m]
    for name in args.shapes.split(","):
        n, k = SHAPES[name]
        a, w = gpu_common.linear_operands(args.max_m, n, k)
        entry = {"N": n, "K": k, "bits": {}, "time": {}}
        if "bits" not in skip:
            ref = ks["persistent"](a, w)
            for kname, run in ks.items():
                if kname in SPLITK:
                    continue
                ms = all_m if kname in BITS_ALL_M else few_m
                try:
                    entry["bits"][kname] = bits(run, a, w, ref, ms)
                except Exception as exc:  # a config that does not compile for this shape
                    entry["bits"][kname] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            print(f"[{time.time() - t0:.0f}s] {name} bits", flush=True)
        if "time" not in skip:
            ws = gpu_common.cold_weights(w)
            for m in time_ms:
                x = a[:m].contiguous()
                floor = (n * k * 2 + m * k * 2 + m * n * 2) / bw * 1e6
                row = {"floor_us": floor}
                for kname, run in ks.items():
                    if kname in SPLITK and n > 8192:
                        continue
                    try:
                        row[kname] = time_kernel(run, x, ws, args.replays)
                    except Exception as exc:
                        row[kname] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
                entry["time"][m] = row
            del ws
            torch.cuda.empty_cache()
            print(f"[{time.time() - t0:.0f}s] {name} time", flush=True)
        result["shapes"][name] = entry
        (args.out / "gemm_study.json").write_text(json.dumps(result, indent=1))
    if "dtypes" not in skip:
        small = ["27b.in_proj_ba", "27b.down", "large.gate_up"]
        for dt in (torch.float16, torch.float32):
            result[f"bits_{dt}"] = dtype_bits(ks, dt, small, few_m)
        print(f"[{time.time() - t0:.0f}s] dtypes", flush=True)
        (args.out / "gemm_study.json").write_text(json.dumps(result, indent=1))
    if "fp8" not in skip:
        try:
            result["fp8_block"] = fp8_block(args.tree, all_m, [1, 4, 16, 64, 256], bw, 20)
        except Exception as exc:
            result["fp8_block"] = {"error": f"{type(exc).__name__}: {str(exc)[:400]}"}
        print(f"[{time.time() - t0:.0f}s] fp8", flush=True)
    result["seconds"] = time.time() - t0
    (args.out / "gemm_study.json").write_text(json.dumps(result, indent=1))
    print(summary(result))
    (args.out / "gemm_study.md").write_text(summary(result))


def summary(result: dict) -> str:
    """Per shape and M: the floor, cuBLAS, persistent and the fastest candidate whose bits
    equal the persistent kernel's at every M checked."""
    lines = [f"env: {result['env']}", ""]
    lines.append("| shape | M | floor us | cublas | persistent | best exact cand (us) | x cublas |")
    lines.append("|---|---|---|---|---|---|---|")
    for name, e in result["shapes"].items():
        exact = {k for k, b in e["bits"].items() if "error" not in b and not b["differ_ref"]} - {
            "persistent"
        }
        for m, row in e["time"].items():

            def us(k, row=row):
                return row.get(k, {}).get("median_us", float("nan"))

            cands = [(us(k), k) for k in exact if k in row and "median_us" in row[k]]
            best = min(cands) if cands else (float("nan"), "-")
            lines.append(
                f"| {name} | {m} | {row['floor_us']:.1f} | {us('cublas'):.1f} | "
                f"{us('persistent'):.1f} | {best[1]} {best[0]:.1f} | {best[0] / us('cublas'):.2f} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
