"""Seeded random weights for the harness's model (in the served dtype, bf16 by default;
A_log in fp32).

The GDN decay is made slow (``A_log`` small, ``dt_bias`` negative), so the
recurrent state keeps a long memory, as the long-context heads of a trained
model do: a difference that enters the state stays there and can accumulate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from gdn_parity.drift.model.config import ModelConfig

DTYPE = torch.bfloat16


@dataclass(frozen=True)
class GDNWeights:
    qkv: torch.Tensor  # [qkv_dim, hidden]
    z: torch.Tensor  # [HV * V, hidden]
    b: torch.Tensor  # [HV, hidden]
    a: torch.Tensor  # [HV, hidden]
    conv: torch.Tensor  # [qkv_dim, width]
    A_log: torch.Tensor  # [HV] fp32
    dt_bias: torch.Tensor  # [HV]
    norm: torch.Tensor  # [V], the gated RMSNorm's weight
    out: torch.Tensor  # [hidden, HV * V]


@dataclass(frozen=True)
class AttentionWeights:
    q: torch.Tensor  # [heads * head_dim, hidden]
    k: torch.Tensor  # [kv_heads * head_dim, hidden]
    v: torch.Tensor  # [kv_heads * head_dim, hidden]
    q_norm: torch.Tensor  # [head_dim]
    k_norm: torch.Tensor  # [head_dim]
    o: torch.Tensor  # [hidden, heads * head_dim]


@dataclass(frozen=True)
class LayerWeights:
    input_norm: torch.Tensor
    mixer: GDNWeights | AttentionWeights
    post_norm: torch.Tensor
    gate: torch.Tensor  # [intermediate, hidden]
    up: torch.Tensor  # [intermediate, hidden]
    down: torch.Tensor  # [hidden, intermediate]


@dataclass(frozen=True)
class ModelWeights:
    embed: torch.Tensor  # [vocab, hidden]
    layers: list[LayerWeights]
    final_norm: torch.Tensor
    lm_head: torch.Tensor  # [vocab, hidden]


class _Init:
    """Draws every tensor from one seeded CPU generator, then moves it to ``device`` in
    ``dtype`` (the same draws in every dtype)."""

    def __init__(self, seed: int, device: str, dtype: torch.dtype):
        self.gen = torch.Generator().manual_seed(seed)
        self.device = device
        self.dtype = dtype

    def normal(self, *shape: int, std: float) -> torch.Tensor:
        return (torch.randn(*shape, generator=self.gen) * std).to(self.dtype).to(self.device)

    def uniform(self, n: int, low: float, high: float) -> torch.Tensor:
        return torch.rand(n, generator=self.gen) * (high - low) + low

    def ones(self, n: int) -> torch.Tensor:
        return torch.ones(n, dtype=self.dtype, device=self.device)

    def linear(self, out: int, fan_in: int, scale: float = 1.0) -> torch.Tensor:
        return self.normal(out, fan_in, std=scale / math.sqrt(fan_in))


def _gdn(c: ModelConfig, init: _Init, residual_scale: float) -> GDNWeights:
    hv = c.gdn_v_heads
    return GDNWeights(
        qkv=init.linear(c.qkv_dim, c.hidden),
        z=init.linear(c.gdn_v_dim, c.hidden),
        b=init.linear(hv, c.hidden),
        a=init.linear(hv, c.hidden),
        conv=init.normal(c.qkv_dim, c.conv_width, std=1 / math.sqrt(c.conv_width)),
        A_log=torch.log(init.uniform(hv, 0.02, 0.5)).to(init.device),
        dt_bias=torch.full((hv,), -2.0, dtype=init.dtype, device=init.device),
        norm=init.ones(c.gdn_head_dim),
        out=init.linear(c.hidden, c.gdn_v_dim, residual_scale),
    )


def _attention(c: ModelConfig, init: _Init, residual_scale: float) -> AttentionWeights:
    q_dim = c.attn_heads * c.attn_head_dim
    kv_dim = c.attn_kv_heads * c.attn_head_dim
    return AttentionWeights(
        q=init.linear(q_dim, c.hidden),
        k=init.linear(kv_dim, c.hidden),
        v=init.linear(kv_dim, c.hidden),
        q_norm=init.ones(c.attn_head_dim),
        k_norm=init.ones(c.attn_head_dim),
        o=init.linear(c.hidden, q_dim, residual_scale),
    )


def make_weights(config: ModelConfig, device: str, dtype: torch.dtype = DTYPE) -> ModelWeights:
    """The seeded weights of ``config`` in ``dtype`` (sglang's ``--dtype``; A_log in fp32)."""
    init = _Init(config.seed, device, dtype)
    residual_scale = 1 / math.sqrt(2 * config.layers)
    layers = []
    for layer in range(config.layers):
        mixer = (_gdn if config.is_gdn(layer) else _attention)(config, init, residual_scale)
        layers.append(
            LayerWeights(
                input_norm=init.ones(config.hidden),
                mixer=mixer,
                post_norm=init.ones(config.hidden),
                gate=init.linear(config.intermediate, config.hidden),
                up=init.linear(config.intermediate, config.hidden),
                down=init.linear(config.hidden, config.intermediate, residual_scale),
            )
        )
    return ModelWeights(
        embed=init.normal(config.vocab, config.hidden, std=1.0),
        layers=layers,
        final_norm=init.ones(config.hidden),
        lm_head=init.linear(config.vocab, config.hidden),
    )
