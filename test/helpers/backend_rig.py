"""The real GDNAttnBackend, and HybridLinearAttnBackend's commit, on hand-built real pools.

The backends are made without ``__init__`` (which needs a ModelRunner and a
GPU-sized pool). Every attribute the decode, target-verify and commit paths
read is set to a real sglang object or tensor: the kernel dispatcher,
``ForwardMetadata``, a ``MambaPool.SpeculativeState`` holding every layer's
conv/SSM pools and verify scratch, and a forward batch with the fields those
paths read. The commit runs sglang's scatter kernels, which need CUDA.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import torch


@dataclass(frozen=True)
class Shape:
    n: int  # requests
    d: int  # draft tokens per verify
    h: int
    hv: int
    k: int
    v: int
    w: int = 4

    @property
    def conv_dim(self) -> int:
        return 2 * self.h * self.k + self.hv * self.v


def make_layer(layer_id: int, s: Shape, gen: torch.Generator, device: str) -> SimpleNamespace:
    """The attributes of a RadixLinearAttention that the GDN backend reads."""
    return SimpleNamespace(
        layer_id=layer_id,
        conv_weights=(torch.randn(s.conv_dim, s.w, generator=gen) * 0.5).bfloat16().to(device),
        bias=None,
        activation="silu",
        A_log=torch.randn(s.hv, generator=gen).to(device),
        dt_bias=torch.randn(s.hv, generator=gen).to(device),
        head_q_dim=s.k,
        head_k_dim=s.k,
        head_v_dim=s.v,
        num_q_heads=s.h,
        num_k_heads=s.h,
        num_v_heads=s.hv,
        q_dim=s.h * s.k,
        k_dim=s.h * s.k,
        v_dim=s.hv * s.v,
    )


class BackendRig:
    def __init__(
        self,
        layer_ids: list[int],
        s: Shape,
        slots: int,
        indices: torch.Tensor,
        ssm_dtype: torch.dtype,
        device: str,
        *,
        exact_parity: bool = False,
        state_trace=None,
    ):
        from sglang.srt.layers.attention.hybrid_linear_attn_backend import (
            HybridLinearAttnBackend,
        )
        from sglang.srt.layers.attention.linear.gdn_backend import (
            GDNAttnBackend,
            GDNKernelDispatcher,
        )
        from sglang.srt.layers.attention.linear.utils import LinearAttnKernelBackend
        from sglang.srt.mem_cache.memory_pool import MambaPool

        layers, window = len(layer_ids), (s.conv_dim, s.w - 1)
        self.s, self.indices, self.device = s, indices, device
        self.state = MambaPool.SpeculativeState(
            conv=[torch.zeros(layers, slots, *window, dtype=torch.bfloat16, device=device)],
            temporal=torch.zeros(layers, slots, s.hv, s.v, s.k, dtype=ssm_dtype, device=device),
            intermediate_ssm=torch.zeros(
                layers, slots + 1, s.d, s.hv, s.v, s.k, dtype=ssm_dtype, device=device
            ),
            intermediate_conv_window=[
                torch.zeros(layers, slots + 1, s.d, *window, dtype=torch.bfloat16, device=device)
            ],
        )
        mamba_map = {layer_id: i for i, layer_id in enumerate(layer_ids)}
        triton = LinearAttnKernelBackend.TRITON
        gdn = GDNAttnBackend.__new__(GDNAttnBackend)
        gdn.kernel_dispatcher = GDNKernelDispatcher(triton, triton, triton)
        gdn.verify_exact_parity = exact_parity
        gdn.state_trace = state_trace
        gdn.mis_metadata = None
        gdn._use_strided_target_verify_qkv = True
        # Request slot i owns scratch row i (build_verify_intermediate_state_indices
        # sizes this from the runtime's batch limits, which a unit test has not published).
        gdn.verify_intermediate_state_indices = torch.arange(
            slots + 1, dtype=torch.int32, device=device
        )
        gdn.req_to_token_pool = SimpleNamespace(
            size=slots,
            mamba_pool=SimpleNamespace(),
            mamba_map=mamba_map,
            mamba2_layer_cache=lambda layer_id: self.state.at_layer_idx(mamba_map[layer_id]),
            get_speculative_mamba2_params_all_layers=lambda: self.state,
            short_conv_pool=SimpleNamespace(conv_state=None, intermediate_conv_state=None),
            ngram_pool=SimpleNamespace(context=None, intermediate_context=None),
        )
        gdn.accept_lens_pool = None
        self.gdn = gdn
        self.hybrid = HybridLinearAttnBackend.__new__(HybridLinearAttnBackend)
        self.hybrid.linear_attn_backend = gdn

    def _metadata(self, tokens_per_request: int, target_verify: bool):
        from sglang.srt.layers.attention.mamba.mamba2_metadata import ForwardMetadata

        n = self.s.n
        kwargs = {"is_target_verify": True, "draft_token_num": self.s.d} if target_verify else {}
        return ForwardMetadata(
            query_start_loc=torch.arange(
                0,
                n * tokens_per_request + 1,
                tokens_per_request,
                dtype=torch.int32,
                device=self.device,
            ),
            mamba_cache_indices=self.indices,
            **kwargs,
        )

    def decode(self, layer, x, a, b, rids, positions, input_ids):
        from sglang.srt.model_executor.forward_batch_info import ForwardMode

        self.gdn.forward_metadata = self._metadata(1, target_verify=False)
        batch = SimpleNamespace(
            forward_mode=ForwardMode.DECODE,
            batch_size=self.s.n,
            mamba_track_mask=None,
            rids=rids,
            positions=positions,
            input_ids=input_ids,
            req_pool_indices=torch.arange(self.s.n, device=self.device),
        )
        out = self.gdn.forward_decode(layer, batch, mixed_qkv=x, a=a, b=b)
        return out.view(self.s.n, self.s.hv, self.s.v)

    def verify(self, layer, x, a, b, rids, positions, input_ids):
        from sglang.srt.model_executor.forward_batch_info import ForwardMode

        s = self.s
        self.gdn.forward_metadata = self._metadata(s.d, target_verify=True)
        batch = SimpleNamespace(
            forward_mode=ForwardMode.TARGET_VERIFY,
            spec_info=SimpleNamespace(draft_token_num=s.d),
            rids=rids,
            positions=positions,
            input_ids=input_ids,
            req_pool_indices=torch.arange(s.n, device=self.device),
        )
        out = self.gdn.forward_extend(layer, batch, mixed_qkv=x, a=a, b=b)
        return out.view(s.n, s.d, s.hv, s.v)

    def commit(self, last_correct_step_indices: torch.Tensor) -> None:
        """HybridLinearAttnBackend.update_mamba_state_after_mtp_verify (CUDA only)."""
        self.hybrid.update_mamba_state_after_mtp_verify(
            last_correct_step_indices, None, None, model=None
        )
