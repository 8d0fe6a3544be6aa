"""Compile one of the series' Triton kernels from a tree ahead of time for sm_90; print its PTX.

No GPU is needed: Triton lowers to PTX on the CPU. The kernels and their compile-time
arguments:

  packed-decode ACT POOL       fused_recurrent_gated_delta_rule_packed_decode_kernel,
                               H = 16, HV = 48, K = V = 128, BV = 32, one warp, 3 stages
  few-rows DTYPE BM,BN,BK,W,S [LARGE]   batch_invariant_ops.matmul_kernel_few_rows
  split-k DTYPE BM,BN,BK,W,S [LARGE]    batch_invariant_ops.matmul_kernel_split_k

Pointers, N, K and the row strides are specialized as divisible by 16, unit strides as
constants, as Triton specializes a launch over aligned, contiguous tensors.

usage: aot_ptx.py TREE KERNEL ARGS...
"""

from __future__ import annotations

import importlib
import sys

from gdn_parity.sandbox import torch_cpu_device, torchvision_shim


def _compile(fn, types: dict, constants: dict, divisible: tuple, warps: int, stages: int) -> str:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = list(fn.arg_names)
    signature = {n: "constexpr" if n in constants else types[n] for n in names}
    source = ASTSource(
        fn=fn,
        signature=signature,
        constexprs={(names.index(n),): v for n, v in constants.items()},
        attrs={(names.index(n),): [["tt.divisibility", 16]] for n in divisible},
    )
    target = GPUTarget("cuda", 90, 32)
    return triton.compile(
        source, target=target, options=dict(num_warps=warps, num_stages=stages)
    ).asm["ptx"]


def packed_decode(act: str, pool: str) -> str:
    module = importlib.import_module("sglang.kernels.ops.attention.fla.fused_recurrent")
    h, hv, k, v = 16, 48, 128, 128
    pointers = dict(
        mixed_qkv=act,
        a=act,
        b=act,
        A_log="fp32",
        dt_bias=act,
        o=act,
        h0=pool,
        ht=pool,
        ssm_state_indices="i32",
    )
    types = {n: "*" + t for n, t in pointers.items()} | {"scale": "fp32"}
    constants = dict(
        stride_mixed_qkv_tok=2 * h * k + hv * v,
        stride_a_tok=hv,
        stride_b_tok=hv,
        stride_init_state_token=hv * v * k,
        stride_final_state_token=hv * v * k,
        stride_indices_seq=1,
        H=h,
        HV=hv,
        K=k,
        V=v,
        BK=k,
        BV=32,
        SOFTPLUS_THRESHOLD=20.0,
        USE_QK_L2NORM_IN_KERNEL=True,
    )
    fn = module.fused_recurrent_gated_delta_rule_packed_decode_kernel
    return _compile(fn, types, constants, tuple(pointers), warps=1, stages=3)


def gemm(kernel: str, dtype: str, tile: str, large: str = "0") -> str:
    module = importlib.import_module("sglang.srt.batch_invariant_ops.batch_invariant_ops")
    bm, bn, bk, warps, stages = map(int, tile.split(","))
    big = large == "1"
    ptr = "*" + dtype
    if kernel == "few-rows":
        fn = module.matmul_kernel_few_rows
        types = dict(a_ptr=ptr, b_ptr=ptr, c_ptr=ptr, bias_ptr=ptr)
        constants = dict(
            stride_ak=1,
            stride_bk=1,
            stride_cn=1,
            A_LARGE=big,
            B_LARGE=big,
            C_LARGE=big,
            HAS_BIAS=True,
        )
        divisible = (
            "a_ptr",
            "b_ptr",
            "c_ptr",
            "bias_ptr",
            "N",
            "K",
            "stride_am",
            "stride_bn",
            "stride_cm",
        )
    else:
        fn = module.matmul_kernel_split_k
        types = dict(a_ptr=ptr, b_ptr=ptr, partial_ptr="*fp32", K_PER_SPLIT="i32")
        constants = dict(stride_ak=1, stride_bk=1, A_LARGE=big, B_LARGE=big, P_LARGE=big)
        divisible = ("a_ptr", "b_ptr", "partial_ptr", "K", "K_PER_SPLIT", "stride_am", "stride_bn")
    types |= {n: "i32" for n in ("M", "N", "K", "stride_am", "stride_bn", "stride_cm")}
    constants |= dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk)
    return _compile(fn, types, constants, divisible, warps, stages)


def main() -> None:
    tree, kernel, *args = sys.argv[1:]
    sys.path.insert(0, f"{tree}/python")
    torchvision_shim.install()
    torch_cpu_device.install()
    ptx = packed_decode(*args) if kernel == "packed-decode" else gemm(kernel, *args)
    sys.stdout.write(ptx)


if __name__ == "__main__":
    main()
