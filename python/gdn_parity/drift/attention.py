"""The full-attention layers: GQA with q/k RMSNorm and RoPE over a per-request KV cache.

Row ``i`` of any forward writes its K/V at its position and attends over the
cache up to it, one row at a time (``rowwise.attend``): a verify row at
position p computes exactly what decode computes at position p.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gdn_parity.drift import rowwise
from gdn_parity.drift.config import ModelConfig
from gdn_parity.drift.weights import AttentionWeights


class KVCache:
    """Keys and values of every attention layer: ``[layers, max_len, kv_heads, head_dim]``."""

    def __init__(self, config: ModelConfig, max_len: int, dtype: torch.dtype, device: str):
        shape = (len(config.attention_layers), max_len, config.attn_kv_heads, config.attn_head_dim)
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)


class AttentionLayer:
    def __init__(self, index: int, weights: AttentionWeights, config: ModelConfig):
        self.index = index  # in the KV cache's layer dim
        self.w = weights
        self.c = config

    def forward_row(self, x: torch.Tensor, position: int, cache: KVCache) -> torch.Tensor:
        """Attention output (projected) of one normed row ``[1, hidden]`` at ``position``."""
        c, w = self.c, self.w
        q = F.linear(x, w.q).view(c.attn_heads, c.attn_head_dim)
        k = F.linear(x, w.k).view(c.attn_kv_heads, c.attn_head_dim)
        v = F.linear(x, w.v).view(c.attn_kv_heads, c.attn_head_dim)
        q = rowwise.rope(rowwise.rms_norm(q, w.q_norm, c.rms_eps), position, c.rope_theta)
        k = rowwise.rope(rowwise.rms_norm(k, w.k_norm, c.rms_eps), position, c.rope_theta)
        keys, values = cache.keys[self.index], cache.values[self.index]
        keys[position] = k
        values[position] = v
        out = rowwise.attend(q, keys[: position + 1], values[: position + 1])
        return F.linear(out[None], w.o)
