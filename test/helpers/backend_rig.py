"""The real GDNAttnBackend, and HybridLinearAttnBackend's commit, on real pools.

The GDN backend and its ``MambaPool.SpeculativeState`` (every layer's conv/SSM
pools and verify scratch) are built as the server stack builds them
(``gdn_parity.drift.model.server.backends``: no ``__init__``, which needs a
ModelRunner); the rig adds ``ForwardMetadata`` and forward batches with the
fields the decode, target-verify and commit paths read. The commit runs
sglang's scatter kernels, which need CUDA.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import torch

from gdn_parity.drift.model.config import ModelConfig
from gdn_parity.drift.model.server import backends
from gdn_parity.drift.model.server.numerics import ServerNumerics


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

    @property
    def config(self) -> ModelConfig:
        """A model with one GDN layer of this geometry (K = V, as the harness's)."""
        assert self.k == self.v, "the harness's GDN layers have K = V"
        return ModelConfig(
            name="gdn-rig", hidden=64, layers=1, intermediate=128, gdn_k_heads=self.h,
            gdn_v_heads=self.hv, gdn_head_dim=self.k, attn_heads=2, attn_kv_heads=1,
            attn_head_dim=16, conv_width=self.w,
        )  # fmt: skip


def make_layer(layer_id: int, s: Shape, gen: torch.Generator, device: str) -> SimpleNamespace:
    """A RadixLinearAttention's attributes, with seeded random weights."""
    weights = SimpleNamespace(
        conv=(torch.randn(s.conv_dim, s.w, generator=gen) * 0.5).bfloat16().to(device),
        A_log=torch.randn(s.hv, generator=gen).to(device),
        dt_bias=torch.randn(s.hv, generator=gen).to(device),
    )
    return backends.gdn_layer(layer_id, s.config, weights)


class BackendRig:
    """One GDN layer (``layer_id``) of ``s.n`` requests in slots ``indices`` of ``s.n + 1``."""

    def __init__(
        self,
        layer_id: int,
        s: Shape,
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

        self.s, self.indices, self.device = s, indices, device
        self.state = backends.speculative_state(
            s.config, s.n, s.d, ssm_dtype, torch.bfloat16, device
        )
        numerics = ServerNumerics.of_server(deterministic=False, exact_parity=exact_parity)
        self.gdn = backends.gdn_backend(self.state, [layer_id], numerics, s.n, device)
        self.gdn.state_trace = state_trace
        self.hybrid = HybridLinearAttnBackend.__new__(HybridLinearAttnBackend)
        self.hybrid.linear_attn_backend = self.gdn

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
