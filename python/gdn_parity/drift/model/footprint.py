"""How much GPU memory one harness model takes, to refuse a size that cannot fit."""

from __future__ import annotations

from dataclasses import dataclass

from gdn_parity.drift.model.config import ModelConfig
from gdn_parity.drift.model.server.numerics import SPLIT_TILE
from gdn_parity.drift.model.server.padding import padded_batch

GIB = 1 << 30
WORKSPACE = 4 * GIB  # CUDA context, kernels' scratch, CUDA graphs' pools, the allocator's slack
GDN_CHUNK = 64  # tokens per state of fla's chunked GDN prefill (chunk_gated_delta_rule's BT)


@dataclass(frozen=True)
class RunHolds:
    """What a run keeps on the GPU besides the weights, in its units."""

    requests: int
    draft_tokens: int  # rows per request of the widest verify (gamma + 1)
    context: int  # KV slots per request (the server stack's max_len)
    kept_states: int = 0  # request 0's GDN states kept on the GPU, one per token (demo's Base)
    # the longest prefill forward, in tokens (cost: a chunk of --context); 0: a prompt of a
    # few dozen tokens, whose activations the workspace covers
    prefill_rows: int = 0
    kv_element_bytes: int | None = None  # the KV pool's (1 for FP8); None: the activations'


def _slots(requests: int) -> int:
    """The GDN pools' slots: the widest padded batch, and the padded rows' slot."""
    return max(padded_batch(requests, phase) for phase in ("decode", "verify")) + 1


def _request_state(config: ModelConfig, dtype_bytes: int, ssm_bytes: int) -> int:
    """One request's GDN state, every layer: SSM, and the conv window at the activations'
    width."""
    ssm = config.gdn_v_heads * config.gdn_head_dim**2 * ssm_bytes
    conv = config.qkv_dim * (config.conv_width - 1) * dtype_bytes
    return len(config.gdn_layers) * (ssm + conv)


def gdn_pool_bytes(config: ModelConfig, dtype_bytes: int, ssm_bytes: int, holds: RunHolds) -> int:
    """The GDN pools: every slot's SSM and conv state, with the verify scratch of
    ``holds.draft_tokens`` steps (``backends.speculative_state``)."""
    state = _request_state(config, dtype_bytes, ssm_bytes)
    return _slots(holds.requests) * state * (1 + holds.draft_tokens)


def kv_pool_bytes(config: ModelConfig, dtype_bytes: int, holds: RunHolds) -> int:
    """The KV pool: K and V of every attention layer, ``holds.context`` slots per request, the
    padded writes' slot and the page sglang's pool adds (``size + page_size``), at
    ``holds.kv_element_bytes`` (1 for FP8), else at the activations' width."""
    per_slot = len(config.attention_layers) * 2 * config.attn_kv_heads * config.attn_head_dim
    element = holds.kv_element_bytes or dtype_bytes
    return (holds.requests * holds.context + 2) * per_slot * element


def attention_metadata_bytes(config: ModelConfig, holds: RunHolds) -> int:
    """What the Triton backend builds per forward that grows with the context: the decode
    kernel's split buffers (fp32 partial outputs and their log-sum-exp; under deterministic
    inference one split per ``SPLIT_TILE`` tokens, for at most a padded batch of rows, also in
    patch 0008's verify), the KV id stream of decode and of the extend kernel's verify (int64,
    one id per context token of each request; 0008's verify reads ``req_to_token`` itself)
    and ``req_to_token`` (int32)."""
    rows = _slots(holds.requests) - 1
    splits = -(-holds.context // SPLIT_TILE)
    split_buffers = rows * config.attn_heads * splits * (config.attn_head_dim + 1) * 4
    kv_ids = holds.requests * holds.context * 8
    return split_buffers + kv_ids + rows * holds.context * 4


def prefill_bytes(config: ModelConfig, dtype_bytes: int, rows: int) -> int:
    """The activations of a prefill forward of ``rows`` tokens, at their peak: the residual
    stream and its normed copy, and the larger of the MLP's (gate_up, silu of the gate, the
    product) and a GDN layer's (in_proj_qkvz and in_proj_ba, the contiguous and the convolved
    q/k/v, and the chunk kernel's w, u, new values and output with its fp32 blocks, about
    ``8 * v_dim`` values a token, and its states, one per ``GDN_CHUNK`` tokens)."""
    c = config
    mlp = 4 * c.intermediate
    gdn = c.qkv_dim + c.gdn_v_dim + 2 * c.gdn_v_heads + 2 * c.qkv_dim + 8 * c.gdn_v_dim
    gdn += c.gdn_v_heads * c.gdn_head_dim**2 // GDN_CHUNK
    return rows * (2 * c.hidden + max(mlp, gdn)) * dtype_bytes


def model_bytes(config: ModelConfig, dtype_bytes: int, ssm_bytes: int, holds: RunHolds) -> int:
    """One server-stack model: its weights, the GDN and KV pools, the logits of the widest
    verify (fp32), the states a demo keeps per token, the attention's per-forward metadata,
    the activations of the longest prefill forward, and ``WORKSPACE``. The snapshots ``demo``
    and ``cost`` restore from are in host memory (``ServerModel.snapshot``)."""
    logits = _slots(holds.requests) * holds.draft_tokens * config.vocab * 4
    kept = holds.kept_states * _request_state(config, dtype_bytes, ssm_bytes)
    return (
        config.parameters() * dtype_bytes
        + gdn_pool_bytes(config, dtype_bytes, ssm_bytes, holds)
        + kv_pool_bytes(config, dtype_bytes, holds)
        + logits
        + kept
        + attention_metadata_bytes(config, holds)
        + prefill_bytes(config, dtype_bytes, holds.prefill_rows)
        + WORKSPACE
    )


def fit_problem(
    config: ModelConfig,
    dtype_bytes: int,
    ssm_bytes: int,
    holds: RunHolds,
    workers: int,
    gpu_bytes: int,
) -> str | None:
    """Why ``workers`` models of ``config`` at once do not fit ``gpu_bytes``, or None."""
    one = model_bytes(config, dtype_bytes, ssm_bytes, holds)
    if workers * one <= gpu_bytes:
        return None
    need = f"{workers} x {one / GIB:.0f} GiB" if workers > 1 else f"{one / GIB:.0f} GiB"
    fix = "fewer --jobs, or a smaller --size" if workers > 1 else "a smaller --size or --batch"
    return (
        f"--size {config.name} needs about {need} of GPU memory and the GPU has "
        f"{gpu_bytes / GIB:.0f} GiB: pass {fix}"
    )
