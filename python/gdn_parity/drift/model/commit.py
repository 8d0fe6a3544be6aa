"""Commit the accepted verify step into the persistent pools, with sglang's scatter kernels.

On CUDA this is ``scatter_mamba_states_after_mtp_verify`` itself, as
``HybridLinearAttnBackend.update_mamba_state_after_mtp_verify`` calls it. Its
wrappers refuse host tensors, so under the Triton interpreter the same two
kernels (``_fused_mamba_state_scatter_with_mask_kernel`` for the SSM state,
``_fused_conv_window_scatter_with_mask_kernel`` for the conv window) are
launched with the arguments the wrappers would pass.
"""

from __future__ import annotations

import torch
import triton

from gdn_parity.drift.model.gdn import GDNPools
from gdn_parity.drift.model.kernels import SglangKernels

BLOCK_SIZE = 1024  # the wrappers' block


def commit_verify(
    kernels: SglangKernels, pools: GDNPools, slots: torch.Tensor, steps: torch.Tensor
) -> None:
    """``pools.temporal[:, slots[i]] = pools.intermediate_ssm[:, i, steps[i]]`` (and conv)."""
    if pools.temporal.is_cuda:
        kernels.scatter_after_verify(pools, slots, steps, None, None)
        return
    slots, steps = slots.to(torch.int32), steps.to(torch.int32)
    rows = torch.arange(steps.shape[0], dtype=torch.int32)
    _launch_ssm_scatter(kernels, pools.temporal, pools.intermediate_ssm, slots, steps, rows)
    _launch_conv_scatter(
        kernels, pools.conv[0], pools.intermediate_conv_window[0], slots, steps, rows
    )


def _launch_ssm_scatter(kernels, dst, src, slots, steps, rows) -> None:
    elem = dst.numel() // (dst.shape[0] * dst.shape[1])
    grid = (steps.shape[0], dst.shape[0], triton.cdiv(elem, BLOCK_SIZE))
    kernels.ssm_scatter_kernel[grid](
        src,
        dst,
        slots,
        steps,
        rows,
        elem,
        src.stride(0),
        src.stride(1),
        src.stride(2),
        dst.stride(0),
        dst.stride(1),
        src.shape[1],
        src.shape[2],
        dst.shape[1],
        BLOCK_SIZE=BLOCK_SIZE,
    )


def _launch_conv_scatter(kernels, dst, src, slots, steps, rows) -> None:
    dim, km1 = dst.shape[2], dst.shape[3]
    grid = (steps.shape[0], dst.shape[0], triton.cdiv(dim * km1, BLOCK_SIZE))
    kernels.conv_scatter_kernel[grid](
        src,
        dst,
        slots,
        steps,
        rows,
        dim * km1,
        km1,
        *src.stride(),
        dst.stride(0),
        dst.stride(1),
        src.shape[1],
        src.shape[2],
        dst.shape[1],
        BLOCK_SIZE=BLOCK_SIZE,
    )
