"""The full-attention layers: GQA with q/k RMSNorm and RoPE over a per-request KV cache.

By default row ``i`` of any forward writes its K/V at its position and attends
over the cache up to it, one row at a time (``rowwise.attend``): a verify row at
position p computes exactly what decode computes at position p.

With ``attention="sglang-triton"`` the layer runs sglang's Triton attention
kernels as its triton backend does: ``decode_attention_fwd`` (split-KV, one
split per 256 tokens, as under ``--enable-deterministic-inference``) for Base
decode, ``extend_attention_fwd`` (causal, prefix from the cache) for prefill and
TARGET_VERIFY. Decode and verify then compute attention with different kernels:
what that costs exact parity is the next gap after the GDN layers.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from gdn_parity.drift.model import rowwise
from gdn_parity.drift.model.config import ModelConfig
from gdn_parity.drift.model.weights import AttentionWeights


class KVCache:
    """Keys and values of every attention layer: ``[layers, max_len, kv_heads, head_dim]``."""

    def __init__(self, config: ModelConfig, max_len: int, dtype: torch.dtype, device: str):
        shape = (len(config.attention_layers), max_len, config.attn_kv_heads, config.attn_head_dim)
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)


def _gated(o: torch.Tensor, gate: torch.Tensor | None) -> torch.Tensor:
    """One row's attention output times sigmoid of its output gate (Qwen3.5), or as it is."""
    if gate is None:
        return o
    gated = o.float() * torch.sigmoid(gate.float()).reshape(o.shape)
    return gated.to(o.dtype)


SPLIT_TILE = 256  # SGLANG_TRITON_DECODE_SPLIT_TILE_SIZE's default
MAX_KV_SPLITS = 8  # --triton-attention-num-kv-splits' default


def load_triton_attention() -> Any:
    """sglang's Triton decode and extend attention kernels, from the importable tree."""
    from sglang.kernels.ops.attention import decode_attention, extend_attention

    return decode_attention.decode_attention_fwd, extend_attention.extend_attention_fwd


class AttentionLayer:
    def __init__(
        self,
        index: int,
        weights: AttentionWeights,
        config: ModelConfig,
        triton: Any = None,
        layer_id: int = 0,
    ):
        self.index = index  # in the KV cache's layer dim
        self.layer_id = layer_id  # in the model
        self.w = weights
        self.c = config
        self.triton = triton  # (decode_attention_fwd, extend_attention_fwd), or None: torch
        self.probe: Any = None  # an attribute.recorder.ComponentRecorder while recording

    def _tap(self, component: str, rows) -> None:
        if self.probe is not None and self.probe.active:
            self.probe.tap(self.layer_id, component, rows)

    def _project(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """q, k, v of a row, and its output gate ``[heads, head_dim]`` (None without)."""
        c, w = self.c, self.w
        q = F.linear(x, w.q).view(c.attn_heads, -1)
        gate = None
        if c.attn_output_gate:
            q, gate = q.chunk(2, dim=-1)
        k = F.linear(x, w.k).view(c.attn_kv_heads, c.attn_head_dim)
        v = F.linear(x, w.v).view(c.attn_kv_heads, c.attn_head_dim)
        return q, k, v, gate

    def _norm_rope(self, x: torch.Tensor, weight: torch.Tensor, position: int) -> torch.Tensor:
        c = self.c
        normed = rowwise.rms_norm(x, weight, c.rms_eps)
        return rowwise.rope(normed, position, c.rope_theta, c.rotary_dim)

    def forward_rows(
        self, rows: list[torch.Tensor], start: int, phase: str, cache: KVCache
    ) -> list[torch.Tensor]:
        """Attention outputs (projected) of normed rows ``[1, hidden]`` at ``start...``."""
        keys, values = cache.keys[self.index], cache.values[self.index]
        projected = [self._project(x) for x in rows]
        if self.probe is not None and self.probe.active:
            self._tap(
                "qkv_proj",
                [torch.cat([t.reshape(1, -1) for t in p if t is not None], -1) for p in projected],
            )
        qs = []
        for i, (q, k, v, _) in enumerate(projected):
            qs.append(self._norm_rope(q, self.w.q_norm, start + i))
            keys[start + i] = self._norm_rope(k, self.w.k_norm, start + i)
            values[start + i] = v
        self._tap("q_norm_rope", qs)
        self._tap("k_norm_rope", keys[start : start + len(rows)])
        if self.triton is None:
            outs = [
                rowwise.attend(q, keys[: start + i + 1], values[: start + i + 1])
                for i, q in enumerate(qs)
            ]
        elif phase == "decode":
            outs = list(self._triton_decode(torch.stack(qs), start + 1, keys, values))
        else:
            outs = list(self._triton_extend(torch.stack(qs), start, keys, values))
        outs = [_gated(o, p[3]) for o, p in zip(outs, projected, strict=True)]
        self._tap("attention", outs)
        projected_outs = [F.linear(o.reshape(1, -1), self.w.o) for o in outs]
        self._tap("o_proj", projected_outs)
        return projected_outs

    def _triton_decode(self, q, length, keys, values) -> torch.Tensor:
        decode_attention_fwd, _ = self.triton
        heads, dim, device = q.shape[1], q.shape[2], q.device
        out = torch.empty_like(q)
        decode_attention_fwd(
            q,
            keys,
            values,
            out,
            torch.tensor([0, length], dtype=torch.int32, device=device),
            torch.arange(length, dtype=torch.int64, device=device),
            torch.empty(1, heads, MAX_KV_SPLITS, dim, dtype=torch.float32, device=device),
            torch.empty(1, heads, MAX_KV_SPLITS, dtype=torch.float32, device=device),
            torch.tensor(
                [min(MAX_KV_SPLITS, -(-length // SPLIT_TILE))], dtype=torch.int32, device=device
            ),
            MAX_KV_SPLITS,
            dim**-0.5,
            1.0,
            1.0,
        )
        return out

    def _triton_extend(self, q, start, keys, values) -> torch.Tensor:
        _, extend_attention_fwd = self.triton
        n, device = q.shape[0], q.device
        out = torch.empty_like(q)
        extend_attention_fwd(
            q,
            keys[start : start + n].contiguous(),
            values[start : start + n].contiguous(),
            out,
            keys,
            values,
            torch.tensor([0, n], dtype=torch.int32, device=device),
            torch.tensor([0, start], dtype=torch.int32, device=device),
            torch.arange(start, dtype=torch.int64, device=device),
            None,
            True,
            None,
            n,
            1.0,
            1.0,
            sm_scale=q.shape[-1] ** -0.5,
        )
        return out
