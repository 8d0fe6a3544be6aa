"""The floor beside each cost: what one target step of a batch must move, over the copy
bandwidth measured on the same GPU before the server started.

The bytes are ``gdn_parity.drift.cost.floor.step_bytes``' model: every weight once (the
embedding only in the rows it gathers), each request's KV prefix once per attention layer,
and each GDN state read once and written back once per row. A step runs one row per request
on Base and gamma + 1 on DSpark (a static verify runs every row, whatever is accepted). The
context is the timed window's mean: the prompt and half the way from the short run's tokens
to the long run's. The draft's weights and KV are not counted: the floor is the target's.
"""

from __future__ import annotations

from gdn_parity.drift.cost.floor import step_bytes
from gdn_parity.drift.model.config import ModelConfig
from gdn_parity.servercost.results import Floor

WEIGHT_BYTES = 2  # the model directory's bfloat16 (the plan refuses --dtype, --quantization)
CONV_BYTES = 2  # sglang's conv state: bfloat16 (the plan refuses SGLANG_MAMBA_CONV_DTYPE)
SSM_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
KV_BYTES = {"auto": WEIGHT_BYTES, "bfloat16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1}


def window_context(prompt_len: int, short_tokens: int, long_tokens: int) -> int:
    """Committed tokens per request at the middle of the timed window (rounded down)."""
    return prompt_len + (short_tokens + long_tokens) // 2


def step_floor(
    config: ModelConfig,
    ssm_dtype: str,
    kv_cache_dtype: str,
    batch: int,
    context: int,
    width: int,
    tokens_per_step: int,
    bytes_per_s: float,
) -> Floor:
    """The floor of a step of ``batch`` requests of ``context`` committed tokens, ``width``
    rows each, committing ``tokens_per_step`` tokens a request."""
    moved = step_bytes(
        config,
        WEIGHT_BYTES,
        SSM_BYTES[ssm_dtype],
        CONV_BYTES,
        KV_BYTES[kv_cache_dtype],
        [context] * batch,
        width,
    )
    step_ms = moved.total / bytes_per_s * 1e3
    return Floor(
        context=context,
        width=width,
        weights=moved.weights,
        state=moved.state,
        kv=moved.kv,
        bytes_per_s=bytes_per_s,
        step_ms=step_ms,
        token_ms=step_ms / tokens_per_step,
    )
