"""How much GPU memory one harness model takes, to refuse a size that cannot fit."""

from __future__ import annotations

from gdn_parity.drift.model.config import ModelConfig
from gdn_parity.drift.model.server.padding import padded_batch

GIB = 1 << 30
WORKSPACE = 4 * GIB  # CUDA context, kernels' scratch, the allocator's slack


def model_bytes(
    config: ModelConfig, dtype_bytes: int, ssm_bytes: int, requests: int, max_draft_tokens: int
) -> int:
    """One server-stack model: its weights, GDN pools with the verify scratch for
    ``max_draft_tokens`` steps, and the logits of the widest verify (fp32). The snapshots
    of the states that ``demo`` and ``cost`` hold are in host memory (``ServerModel.snapshot``)."""
    slots = max(padded_batch(requests, phase) for phase in ("decode", "verify")) + 1
    state = config.gdn_v_heads * config.gdn_head_dim**2 * ssm_bytes
    states = len(config.gdn_layers) * slots * state
    pools = states * (1 + max_draft_tokens)
    logits = slots * max_draft_tokens * config.vocab * 4
    return config.parameters() * dtype_bytes + pools + logits + WORKSPACE


def fit_problem(
    config: ModelConfig,
    dtype_bytes: int,
    ssm_bytes: int,
    requests: int,
    max_draft_tokens: int,
    workers: int,
    gpu_bytes: int,
) -> str | None:
    """Why ``workers`` models of ``config`` at once do not fit ``gpu_bytes``, or None."""
    one = model_bytes(config, dtype_bytes, ssm_bytes, requests, max_draft_tokens)
    if workers * one <= gpu_bytes:
        return None
    need = f"{workers} x {one / GIB:.0f} GiB" if workers > 1 else f"{one / GIB:.0f} GiB"
    fix = "fewer --jobs, or a smaller --size" if workers > 1 else "a smaller --size or --batch"
    return (
        f"--size {config.name} needs about {need} of GPU memory and the GPU has "
        f"{gpu_bytes / GIB:.0f} GiB: pass {fix}"
    )
