"""A GDN layer's recurrence on sglang's own kernels, called as GDNAttnBackend calls them.

Prefill: ``causal_conv1d_fn``, ``fused_gdn_gating`` and the chunked
``TritonGDNKernel.extend``. Base decode: single-token ``causal_conv1d_update``
then ``packed_decode``. TARGET_VERIFY: multi-token ``causal_conv1d_update``
writing the intermediate conv windows, then either the default verify kernel
(``target_verify``, strided q/k/v views) or, with ``--gdn-verify-exact-parity``,
``packed_target_verify``. The states live in pools of sglang's layout, one
request per slot; the verify scratch row of request ``i`` is batch row ``i``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from gdn_parity.drift.model.config import ModelConfig
from gdn_parity.drift.model.kernels import SglangKernels
from gdn_parity.drift.model.weights import GDNWeights


class GDNPools:
    """Every GDN layer's persistent state and verify scratch (``MambaPool.SpeculativeState``).

    ``temporal`` ``[layers, slots, HV, V, K]``, ``conv[0]`` ``[layers, slots, dim, W-1]``,
    ``intermediate_ssm`` ``[layers, rows, D, HV, V, K]`` and
    ``intermediate_conv_window[0]`` ``[layers, rows, D, dim, W-1]`` (the dense layout).
    """

    def __init__(
        self,
        config: ModelConfig,
        draft_tokens: int,
        ssm_dtype: torch.dtype,
        conv_dtype: torch.dtype,
        device: str,
        slots: int = 3,
    ):
        layers = len(config.gdn_layers)
        hv, d = config.gdn_v_heads, config.gdn_head_dim
        window = (config.qkv_dim, config.conv_width - 1)
        self.temporal = torch.zeros(layers, slots, hv, d, d, dtype=ssm_dtype, device=device)
        self.conv = [torch.zeros(layers, slots, *window, dtype=conv_dtype, device=device)]
        steps = max(draft_tokens, 1)
        self.intermediate_ssm = torch.zeros(
            layers, 2, steps, hv, d, d, dtype=ssm_dtype, device=device
        )
        self.intermediate_conv_window = [
            torch.zeros(layers, 2, steps, *window, dtype=conv_dtype, device=device)
        ]

    def state(self, slot: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Copies of one slot's SSM and conv state, all layers."""
        return self.temporal[:, slot].clone(), self.conv[0][:, slot].clone()

    def load(self, slot: int, state: tuple[torch.Tensor, torch.Tensor]) -> None:
        self.temporal[:, slot] = state[0]
        self.conv[0][:, slot] = state[1]


@dataclass(frozen=True)
class TraceStep:
    """What the state trace needs of a forward: GDNStateTrace and a batch-like view."""

    trace: Any  # GDNStateTrace
    batch: Any  # .rids, .positions, .input_ids


class GDNLayer:
    def __init__(
        self,
        layer_id: int,
        index: int,
        weights: GDNWeights,
        config: ModelConfig,
        kernels: SglangKernels,
    ):
        self.layer_id = layer_id
        self.index = index  # in the pools' layer dim
        self.w = weights
        self.c = config
        self.k = kernels
        self.probe: Any = None  # an attribute.recorder.ComponentRecorder while recording

    def _tap_conv(self, mixed: torch.Tensor) -> None:
        if self.probe is not None and self.probe.active:
            self.probe.tap(self.layer_id, "conv", mixed)

    def _split(self, mixed: torch.Tensor) -> tuple[torch.Tensor, ...]:
        c = self.c
        n, h, hv, d = mixed.shape[0], c.gdn_k_heads, c.gdn_v_heads, c.gdn_head_dim
        q, k, v = torch.split(mixed, [h * d, h * d, hv * d], dim=-1)
        return q.view(1, n, h, d), k.view(1, n, h, d), v.view(1, n, hv, d)

    def prefill(
        self, pools: GDNPools, slots: torch.Tensor, mixed, a, b, continued: bool = False
    ) -> torch.Tensor:
        """One request's prompt, or with ``continued`` its next chunk: the conv then starts
        from the slot's window and the recurrence from its state, as sglang's chunked prefill
        continues a request whose prefix is cached (``has_initial_state``)."""
        n = mixed.shape[0]
        conv = pools.conv[0][self.index]
        query_start_loc = torch.tensor([0, n], dtype=torch.int32, device=mixed.device)
        mixed = self.k.causal_conv1d_fn(
            mixed.transpose(0, 1),
            self.w.conv,
            None,
            activation="silu",
            conv_states=conv,
            has_initial_state=torch.full((1,), continued, dtype=torch.bool, device=mixed.device),
            cache_indices=slots,
            query_start_loc=query_start_loc,
            seq_lens_cpu=[n],
        ).transpose(0, 1)[:n]
        g, beta = self.k.fused_gdn_gating(self.w.A_log, a, b, self.w.dt_bias)
        q, k, v = self._split(mixed)
        out, _, _ = self.k.gdn.extend(
            q,
            k,
            v,
            g,
            beta,
            ssm_states=pools.temporal[self.index],
            cache_indices=slots,
            query_start_loc=query_start_loc,
        )
        return out.view(n, self.c.gdn_v_heads, self.c.gdn_head_dim)

    def decode(
        self, pools: GDNPools, slots, mixed, a, b, exact_parity: bool, trace: TraceStep | None
    ):
        conv, ssm = pools.conv[0][self.index], pools.temporal[self.index]
        if trace is not None:
            trace.trace.trace_decode_input(self.layer_id, trace.batch, conv, ssm, slots)
        mixed = self.k.causal_conv1d_update(
            mixed, conv, self.w.conv, None, "silu", conv_state_indices=slots
        )
        self._tap_conv(mixed)
        out = self.k.gdn.packed_decode(
            mixed_qkv=mixed,
            a=a,
            b=b,
            A_log=self.w.A_log,
            dt_bias=self.w.dt_bias,
            scale=self.c.gdn_head_dim**-0.5,
            ssm_states=ssm,
            cache_indices=slots,
            num_v_heads=self.c.gdn_v_heads,
            head_v_dim=self.c.gdn_head_dim,
            # The series' decode under --gdn-verify-exact-parity; trees without
            # the flag ignore the keyword.
            exact_parity=exact_parity,
        )
        return out.view(mixed.shape[0], self.c.gdn_v_heads, self.c.gdn_head_dim)

    def verify(
        self,
        pools: GDNPools,
        slots,
        mixed,
        a,
        b,
        exact_parity: bool,
        trace: TraceStep | None,
    ):
        c, n_tok = self.c, mixed.shape[0]
        bs = slots.shape[0]
        draft = n_tok // bs
        conv, ssm = pools.conv[0][self.index], pools.temporal[self.index]
        inter_ssm = pools.intermediate_ssm[self.index]
        inter_conv = pools.intermediate_conv_window[0][self.index]
        scratch = torch.arange(bs, dtype=torch.int32, device=mixed.device)
        if trace is not None:
            trace.trace.trace_verify_input(self.layer_id, trace.batch, conv, ssm, slots, draft)
        mixed = self.k.causal_conv1d_update(
            mixed.view(bs, draft, -1).transpose(1, 2),
            conv,
            self.w.conv,
            None,
            "silu",
            conv_state_indices=slots,
            intermediate_conv_window=inter_conv,
            intermediate_state_indices=scratch,
        )
        mixed = mixed.transpose(1, 2).reshape(n_tok, -1)
        self._tap_conv(mixed)
        if exact_parity:
            out = self.k.gdn.packed_target_verify(
                mixed_qkv=mixed,
                a=a,
                b=b,
                A_log=self.w.A_log,
                dt_bias=self.w.dt_bias,
                scale=c.gdn_head_dim**-0.5,
                ssm_states=ssm,
                cache_indices=slots,
                intermediate_states_buffer=inter_ssm,
                intermediate_state_indices=scratch,
                cache_steps=draft,
            )
        else:
            q, k, v = self._split(mixed)
            out = self.k.gdn.target_verify(
                A_log=self.w.A_log,
                dt_bias=self.w.dt_bias,
                q=q,
                k=k,
                v=v,
                a=a,
                b=b,
                ssm_states=ssm,
                cache_indices=slots,
                query_start_loc=torch.arange(
                    0, n_tok + 1, draft, dtype=torch.int32, device=mixed.device
                ),
                intermediate_states_buffer=inter_ssm,
                intermediate_state_indices=scratch,
                cache_steps=draft,
                retrieve_parent_token=None,
            )
        if trace is not None:
            trace.trace.trace_verify_steps(
                self.layer_id, trace.batch, inter_ssm, inter_conv, scratch, slots, draft
            )
        return out.view(n_tok, c.gdn_v_heads, c.gdn_head_dim)
