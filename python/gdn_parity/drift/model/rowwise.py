"""The harness's non-GDN math in plain torch, one token row at a time.

Every function takes a single row (``[1, ...]``), so a row gets the same
kernels with the same shapes whether it is decoded alone (M=1) or verified with
D-1 draft rows (M=D): these parts are row-invariant by construction, and any
difference between Base decode and TARGET_VERIFY comes from the GDN layers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim, in fp32, rounded back to ``x``'s dtype."""
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (xf * weight.float()).to(x.dtype)


def gated_rms_norm(
    x: torch.Tensor, gate: torch.Tensor, weight: torch.Tensor, eps: float
) -> torch.Tensor:
    """Qwen3.5's GDN output norm: RMSNorm per head, times SiLU of the gate ``z``."""
    return (rms_norm(x, weight, eps).float() * F.silu(gate.float())).to(x.dtype)


def rope(
    x: torch.Tensor, position: int | torch.Tensor, theta: float, rotary_dim: int | None = None
) -> torch.Tensor:
    """Rotary embedding (rotate-half) of ``x`` ``[..., heads, head_dim]`` at ``position`` (an
    int, or positions shaped to broadcast against ``x`` without its last dim), on the first
    ``rotary_dim`` dims of each head (all of them by default). Elementwise per row."""
    rot = x.shape[-1] if rotary_dim is None else rotary_dim
    half = rot // 2
    freqs = theta ** (-torch.arange(half, device=x.device, dtype=torch.float32) / half)
    angle = torch.as_tensor(position, dtype=torch.float32, device=x.device)[..., None] * freqs
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x.float()[..., :half], x.float()[..., half:rot]
    rotated = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).to(x.dtype)
    return torch.cat([rotated, x[..., rot:]], -1) if rot < x.shape[-1] else rotated


def attend(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Softmax attention of one query row ``[heads, d]`` over ``[length, kv_heads, d]``."""
    heads, dim = q.shape
    kv_heads = keys.shape[1]
    qf = q.float().view(kv_heads, heads // kv_heads, dim)
    scores = torch.einsum("kgd,tkd->kgt", qf, keys.float()) * dim**-0.5
    out = torch.einsum("kgt,tkd->kgd", scores.softmax(-1), values.float())
    return out.reshape(heads * dim).to(q.dtype)
