"""Seeded random weights for the harness's model (in the served dtype, bf16 by default;
A_log in fp32).

The GDN decay is made slow (``A_log`` small, ``dt_bias`` negative), so the
recurrent state keeps a long memory, as the long-context heads of a trained
model do: a difference that enters the state stays there and can accumulate.

The weights a server fuses into one GEMM (q/k/v; GDN qkv and z, b and a; the MLP's
gate and up) are stored fused, as sglang's merged linear layers hold them, and the
parts are views of the fused tensor: a 27B-shaped model fits once, not twice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from gdn_parity.drift.model.config import ModelConfig

DTYPE = torch.bfloat16


@dataclass(frozen=True)
class GDNWeights:
    qkvz: torch.Tensor  # [qkv_dim + HV * V, hidden]: Qwen3.5's contiguous in_proj_qkvz
    ba: torch.Tensor  # [2 * HV, hidden]: in_proj_ba
    qkv: torch.Tensor  # [qkv_dim, hidden], a view of qkvz
    z: torch.Tensor  # [HV * V, hidden], a view of qkvz
    b: torch.Tensor  # [HV, hidden], a view of ba
    a: torch.Tensor  # [HV, hidden], a view of ba
    conv: torch.Tensor  # [qkv_dim, width]
    A_log: torch.Tensor  # [HV] fp32
    dt_bias: torch.Tensor  # [HV]
    norm: torch.Tensor  # [V], the gated RMSNorm's weight
    out: torch.Tensor  # [hidden, HV * V]


@dataclass(frozen=True)
class AttentionWeights:
    qkv: torch.Tensor  # [q rows + 2 * kv_heads * head_dim, hidden]: QKVParallelLinear
    # [heads * head_dim, hidden]; with the output gate [heads * 2 * head_dim, hidden], each
    # head's query rows then its gate rows (sglang's qwen3_5.py)
    q: torch.Tensor
    k: torch.Tensor  # [kv_heads * head_dim, hidden], a view of qkv
    v: torch.Tensor  # [kv_heads * head_dim, hidden], a view of qkv
    q_norm: torch.Tensor  # [head_dim]
    k_norm: torch.Tensor  # [head_dim]
    o: torch.Tensor  # [hidden, heads * head_dim]


@dataclass(frozen=True)
class LayerWeights:
    input_norm: torch.Tensor
    mixer: GDNWeights | AttentionWeights
    post_norm: torch.Tensor
    gate_up: torch.Tensor  # [2 * intermediate, hidden]: MergedColumnParallelLinear
    gate: torch.Tensor  # [intermediate, hidden], a view of gate_up
    up: torch.Tensor  # [intermediate, hidden], a view of gate_up
    down: torch.Tensor  # [hidden, intermediate]


@dataclass(frozen=True)
class ModelWeights:
    embed: torch.Tensor  # [vocab, hidden]
    layers: list[LayerWeights]
    final_norm: torch.Tensor
    lm_head: torch.Tensor  # [vocab, hidden]


class _Init:
    """Draws every tensor from one seeded generator, on the CPU (then moved to ``device``)
    or, with ``on_device``, on the device itself; in ``dtype`` (the same draws in every
    dtype)."""

    def __init__(self, seed: int, device: str, dtype: torch.dtype, on_device: bool = False):
        self.draw_on = device if on_device else "cpu"
        self.gen = torch.Generator(device=self.draw_on).manual_seed(seed)
        self.device = device
        self.dtype = dtype

    def normal(self, *shape: int, std: float) -> torch.Tensor:
        draw = torch.randn(*shape, generator=self.gen, device=self.draw_on)
        return (draw * std).to(self.dtype).to(self.device)

    def fused(self, parts: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """One tensor of ``parts`` stacked by rows, and the parts as views of it."""
        whole = torch.empty(
            sum(p.shape[0] for p in parts), *parts[0].shape[1:], dtype=self.dtype,
            device=self.device,
        )  # fmt: skip
        views, row = [], 0
        for p in parts:
            whole[row : row + p.shape[0]].copy_(p)
            views.append(whole[row : row + p.shape[0]])
            row += p.shape[0]
        return whole, views

    def uniform(self, n: int, low: float, high: float) -> torch.Tensor:
        return torch.rand(n, generator=self.gen, device=self.draw_on).cpu() * (high - low) + low

    def ones(self, n: int) -> torch.Tensor:
        return torch.ones(n, dtype=self.dtype, device=self.device)

    def linear(self, out: int, fan_in: int, scale: float = 1.0) -> torch.Tensor:
        return self.normal(out, fan_in, std=scale / math.sqrt(fan_in))


def _gdn(c: ModelConfig, init: _Init, residual_scale: float) -> GDNWeights:
    hv = c.gdn_v_heads
    qkvz, (qkv, z) = init.fused(
        [init.linear(c.qkv_dim, c.hidden), init.linear(c.gdn_v_dim, c.hidden)]
    )
    ba, (b, a) = init.fused([init.linear(hv, c.hidden), init.linear(hv, c.hidden)])
    return GDNWeights(
        qkvz=qkvz,
        ba=ba,
        qkv=qkv,
        z=z,
        b=b,
        a=a,
        conv=init.normal(c.qkv_dim, c.conv_width, std=1 / math.sqrt(c.conv_width)),
        A_log=torch.log(init.uniform(hv, 0.02, 0.5)).to(init.device),
        dt_bias=torch.full((hv,), -2.0, dtype=init.dtype, device=init.device),
        norm=init.ones(c.gdn_head_dim),
        out=init.linear(c.hidden, c.gdn_v_dim, residual_scale),
    )


def _attention(c: ModelConfig, init: _Init, residual_scale: float) -> AttentionWeights:
    kv_dim = c.attn_kv_heads * c.attn_head_dim
    parts = [init.linear(n, c.hidden) for n in (c.attn_q_dim, kv_dim, kv_dim)]
    qkv, (q, k, v) = init.fused(parts)
    return AttentionWeights(
        qkv=qkv,
        q=q,
        k=k,
        v=v,
        q_norm=init.ones(c.attn_head_dim),
        k_norm=init.ones(c.attn_head_dim),
        o=init.linear(c.hidden, c.attn_heads * c.attn_head_dim, residual_scale),
    )


def make_weights(config: ModelConfig, device: str, dtype: torch.dtype = DTYPE) -> ModelWeights:
    """The seeded weights of ``config`` in ``dtype`` (sglang's ``--dtype``; A_log in fp32)."""
    init = _Init(config.seed, device, dtype, config.gpu_only)
    residual_scale = 1 / math.sqrt(2 * config.layers)
    layers = []
    for layer in range(config.layers):
        mixer = (_gdn if config.is_gdn(layer) else _attention)(config, init, residual_scale)
        input_norm, post_norm = init.ones(config.hidden), init.ones(config.hidden)
        gate_up, (gate, up) = init.fused(
            [init.linear(config.intermediate, config.hidden) for _ in range(2)]
        )
        layers.append(
            LayerWeights(
                input_norm=input_norm,
                mixer=mixer,
                post_norm=post_norm,
                gate_up=gate_up,
                gate=gate,
                up=up,
                down=init.linear(config.hidden, config.intermediate, residual_scale),
            )
        )
    return ModelWeights(
        embed=init.normal(config.vocab, config.hidden, std=1.0),
        layers=layers,
        final_norm=init.ones(config.hidden),
        lm_head=init.linear(config.vocab, config.hidden),
    )
