"""The sglang functions the harness runs, imported from whichever sglang tree is importable.

The worker of each numerics variant makes its own tree importable first (the
0.5.23 tree and the patched tree are both the package ``sglang``), so nothing
here is imported at module level.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SglangKernels:
    gdn: Any  # TritonGDNKernel: packed_decode, target_verify, extend (and packed_target_verify)
    causal_conv1d_update: Callable
    causal_conv1d_fn: Callable
    fused_gdn_gating: Callable
    scatter_after_verify: Callable  # scatter_mamba_states_after_mtp_verify (CUDA/XPU only)
    ssm_scatter_kernel: Any  # the Triton kernels behind it, for the interpreter
    conv_scatter_kernel: Any
    state_trace: type  # GDNStateTrace
    version: str
    tree: str

    @property
    def has_exact_parity(self) -> bool:
        return hasattr(self.gdn, "packed_target_verify")

    def open_trace(self, path: str, model: str, ssm_dtype, conv_dtype, flags: dict):
        """sglang's GDNStateTrace writing to ``path``, with the harness's header."""
        header = {
            "sglang_version": self.version,
            "model": f"gdn-parity drift harness ({model})",
            "tp_rank": 0,
            "pp_rank": 0,
            "ssm_dtype": str(ssm_dtype).removeprefix("torch."),
            "conv_dtype": str(conv_dtype).removeprefix("torch."),
            "flags": flags,
        }
        return self.state_trace(path, header)


def load_kernels() -> SglangKernels:
    from sglang.kernels.ops.attention.linear.fused_gdn_gating import fused_gdn_gating
    from sglang.kernels.ops.mamba import causal_conv1d_triton, mamba_state_scatter_triton
    from sglang.srt.layers.attention.linear.gdn_state_trace import GDNStateTrace
    from sglang.srt.layers.attention.linear.kernels.gdn_triton import TritonGDNKernel
    from sglang.version import __version__

    scatter = mamba_state_scatter_triton
    return SglangKernels(
        gdn=TritonGDNKernel(),
        causal_conv1d_update=causal_conv1d_triton.causal_conv1d_update,
        causal_conv1d_fn=causal_conv1d_triton.causal_conv1d_fn,
        fused_gdn_gating=fused_gdn_gating,
        scatter_after_verify=scatter.scatter_mamba_states_after_mtp_verify,
        ssm_scatter_kernel=scatter._fused_mamba_state_scatter_with_mask_kernel,
        conv_scatter_kernel=scatter._fused_conv_window_scatter_with_mask_kernel,
        state_trace=GDNStateTrace,
        version=__version__,
        tree=str(causal_conv1d_triton.__file__).split("/python/sglang/")[0],
    )
