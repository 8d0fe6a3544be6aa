"""The least a step can cost: the bytes it must move, over the measured copy bandwidth.

A decode or verify step of a memory-bound model reads every weight once (the
embedding only in the rows it gathers), each request's KV cache once per attention
layer and its GDN state once per GDN layer, and writes the state back: once in
decode, once per verified token in verify (sglang keeps a snapshot of every draft
step for the commit). Activations are a rounding error at these sizes and are left
out. The bandwidth is a device-to-device copy's, reads and writes counted, measured
in the process that times the steps. Only the bandwidth needs torch (imported there):
``server-cost``'s runner counts the bytes without it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from gdn_parity.drift.model.config import ModelConfig

COPY_BYTES = 1 << 30  # 1 GiB each way: far beyond any cache


@dataclass(frozen=True)
class StepBytes:
    weights: int
    state: int  # GDN SSM and conv state: read, and written back (per verified token)
    kv: int  # the attention layers' KV cache of every request

    @property
    def total(self) -> int:
        return self.weights + self.state + self.kv


def step_bytes(
    config: ModelConfig,
    weight_bytes: int,
    ssm_bytes: int,
    conv_bytes: int,
    kv_bytes: int,
    lengths: list[int],
    width: int,
) -> StepBytes:
    """What one step over requests of committed ``lengths`` must move; ``width`` tokens each
    (1: decode; gamma + 1: verify)."""
    c = config
    weights = (c.parameters() - c.vocab * c.hidden) * weight_bytes
    per_layer = c.gdn_v_heads * c.gdn_head_dim**2 * ssm_bytes
    per_layer += c.qkv_dim * (c.conv_width - 1) * conv_bytes
    state = len(c.gdn_layers) * per_layer * len(lengths) * (1 + width)
    kv_row = len(c.attention_layers) * 2 * c.attn_kv_heads * c.attn_head_dim * kv_bytes
    kv = kv_row * sum(length + width for length in lengths)
    return StepBytes(weights=weights, state=state, kv=kv)


def copy_bandwidth() -> float:
    """Device-to-device copy bandwidth of the current CUDA device in bytes/s, reads and
    writes counted (the median of 10 copies of 1 GiB)."""
    import torch

    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = []
    for _ in range(10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * COPY_BYTES / statistics.median(times)
