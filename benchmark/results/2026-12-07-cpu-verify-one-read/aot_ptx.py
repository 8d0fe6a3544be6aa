"""Compile decode's stage-1 attention kernel or the one-read verify kernel from a tree ahead of
time for sm_90 on the CPU; print its PTX.

usage: aot_ptx.py TREE KERNEL KV HEADS KV_HEADS DIM ROWS PAGE LOGIT_CAP
  KERNEL  decode (decode_attention's _fwd_kernel_stage1 or _fwd_grouped_kernel_stage1) or
          verify (verify_decode_attention's _verify_rows_kernel_stage1 or
          _verify_rows_grouped_kernel_stage1): the normal kernel when HEADS == KV_HEADS
  KV      bf16 or fp8 (the KV cache's dtype; q is bf16)
  ROWS    verify rows per request (verify only)

Compile-time arguments as the CUDA launchers pass them (4 warps, 2 stages; BLOCK_N 32 with
BLOCK_H 16 grouped, 64 normal), the head strides contiguous, pointers and the other strides
divisible by 16, as Triton specializes a launch over the backend's tensors.
"""

from __future__ import annotations

import importlib
import sys

from gdn_parity.sandbox import torch_cpu_device, torchvision_shim

STRIDES = (
    "stride_qbs", "stride_qh", "stride_buf_kbs", "stride_buf_kh", "stride_buf_vbs",
    "stride_buf_vh", "stride_buf_kpage", "stride_buf_ktok", "stride_buf_vpage",
    "stride_buf_vtok", "stride_mid_ob", "stride_mid_oh", "stride_mid_os",
)  # fmt: skip


def compile_ptx(fn, types: dict, constants: dict, divisible: tuple) -> str:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = list(fn.arg_names)
    source = ASTSource(
        fn=fn,
        signature={n: "constexpr" if n in constants else types[n] for n in names},
        constexprs={(names.index(n),): v for n, v in constants.items()},
        attrs={(names.index(n),): [["tt.divisibility", 16]] for n in divisible},
    )
    target = GPUTarget("cuda", 90, 32)
    return triton.compile(source, target=target, options=dict(num_warps=4, num_stages=2)).asm[
        "ptx"
    ]


def main() -> None:
    tree, kernel, kv, heads, kv_heads, dim, rows, page, cap = sys.argv[1:]
    sys.path.insert(0, f"{tree}/python")
    torchvision_shim.install()
    torch_cpu_device.install()
    heads, kv_heads, dim, rows, page = map(int, (heads, kv_heads, dim, rows, page))
    group = heads // kv_heads
    kv_type = {"bf16": "*bf16", "fp8": "*fp8e4nv"}[kv]
    types = dict(
        Q="*bf16", K_Buffer=kv_type, V_Buffer=kv_type, sm_scale_withk="fp32",
        Att_Out="*fp32", Att_Lse="*fp32", num_kv_splits="*i32",
    ) | {s: "i32" for s in STRIDES}  # fmt: skip
    constants = dict(
        BLOCK_DMODEL=dim, BLOCK_DV=dim, MIN_BLOCK_KV=32, logit_cap=float(cap), Lk=dim, Lv=dim,
        xai_temperature_len=-1, PAGE_SIZE=page, SCORE_MOD=None, Aux0=None, aux0_stride_t=0,
        aux0_stride_h=0, aux0_len=0, stride_qh=dim, stride_buf_kh=dim, stride_buf_vh=dim,
        stride_mid_os=dim,
    )  # fmt: skip
    if group == 1:
        constants |= dict(BLOCK_N=64)
    else:
        constants |= dict(BLOCK_N=32, BLOCK_H=16, kv_group_num=group, q_head_num=heads)
        constants |= dict(USE_PDL=False)
    pointers = ("Q", "K_Buffer", "V_Buffer", "Att_Out", "Att_Lse", "num_kv_splits")
    if kernel == "decode":
        module = importlib.import_module("sglang.kernels.ops.attention.decode_attention")
        types |= dict(kv_indptr="*i32", kv_indices="*i64")
        pointers += ("kv_indptr", "kv_indices")
        constants |= dict(uneven_batch=None, ROTATE_BATCH=False)
        if group == 1:
            fn = module._fwd_kernel_stage1
            constants |= dict(kv_group_num=1)
        else:
            fn = module._fwd_grouped_kernel_stage1
            constants |= dict(
                BLOCK_DPE=0, HAS_MLA=False, IS_GFX1250=False, forced_kv_splits=0,
                USE_FORCED=False,
            )  # fmt: skip
    else:
        module = importlib.import_module("sglang.kernels.ops.attention.verify_decode_attention")
        types |= dict(
            req_to_token="*i32", req_pool_indices="*i64", row_kv_indptr="*i32",
            num_groups="i32", stride_req_to_token="i32",
        )  # fmt: skip
        pointers += ("req_to_token", "req_pool_indices", "row_kv_indptr")
        fn = module._verify_rows_kernel_stage1 if group == 1 else module._verify_rows_grouped_kernel_stage1
        constants |= dict(ROWS=rows)
    divisible = pointers + tuple(s for s in STRIDES if s not in constants)
    sys.stdout.write(compile_ptx(fn, types, constants, divisible))


if __name__ == "__main__":
    main()
