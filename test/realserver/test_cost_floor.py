"""server-cost's floor: the bytes a step of the tiny model must move, counted by hand."""

from __future__ import annotations

import pytest

from gdn_parity.drift.model.config import SIZES
from gdn_parity.servercost.floor import step_floor, window_context

# The tiny model (hidden 64, 4 layers: 3 GDN and 1 attention, MLP 128, GDN 1 q/k head and
# 2 v heads of 16, attention 4 heads and 2 KV heads of 16, conv 4, Qwen3.5's vocabulary),
# its parameters as a step reads them, bf16:
GDN_LAYER = (
    64 * 64  # in_proj_qkv: (2 x 1 + 2) heads x 16 rows
    + 32 * 64  # in_proj_z: 2 v heads x 16
    + 2 * 2 * 64  # in_proj_b, in_proj_a
    + 64 * 4  # conv1d
    + 64 * 32  # out_proj
    + 16  # the gated norm
    + 2 * 2  # A_log, dt_bias
)
ATTENTION_LAYER = 64 * 64 + 32 * 64 + 32 * 64 + 64 * 64 + 16 + 16  # q, k, v, o, q/k norms
MLP_LAYER = 3 * 128 * 64 + 2 * 64  # gate, up, down; the two layer norms
LM_HEAD = 248320 * 64 + 64  # and the final norm; the embedding is gathered, not read
WEIGHT_BYTES = 2 * (3 * GDN_LAYER + ATTENTION_LAYER + 4 * MLP_LAYER + LM_HEAD)


def test_the_hand_count_of_the_weights():
    assert WEIGHT_BYTES == 32_059_704


def test_a_verify_step_of_two_requests():
    # gamma 3: 4 rows a request; 100 committed tokens each; float32 SSM, bf16 KV.
    floor = step_floor(SIZES["tiny"], "float32", "auto", 2, 100, 4, 3, 1e12)
    # A GDN layer's state per request: SSM 2 x 16 x 16 x 4 bytes, conv 64 x 3 x 2 bytes; read
    # once and written once per row: 5 times; 3 layers, 2 requests.
    state = 3 * 2 * (2 * 16 * 16 * 4 + 64 * 3 * 2) * 5
    # KV: 1 layer x (K, V) x 2 heads x 16 x 2 bytes a token, for 100 + 4 tokens, 2 requests.
    kv = 1 * 2 * 2 * 16 * 2 * (100 + 4) * 2
    assert (floor.weights, floor.state, floor.kv) == (WEIGHT_BYTES, state, kv)
    assert (state, kv) == (72_960, 26_624)
    assert floor.step_ms == pytest.approx(32_159_288 / 1e12 * 1e3)
    assert floor.token_ms == pytest.approx(floor.step_ms / 3)
    assert (floor.context, floor.width, floor.bytes_per_s) == (100, 4, 1e12)


def test_a_decode_step_with_a_bf16_pool_and_an_fp8_kv_cache():
    floor = step_floor(SIZES["tiny"], "bfloat16", "fp8_e4m3", 1, 50, 1, 1, 2e12)
    state = 3 * 1 * (2 * 16 * 16 * 2 + 64 * 3 * 2) * 2  # read once, written once
    kv = 1 * 2 * 2 * 16 * 1 * (50 + 1)
    assert (floor.state, floor.kv) == (state, kv) == (8_448, 3_264)
    assert floor.step_ms == pytest.approx((WEIGHT_BYTES + 8_448 + 3_264) / 2e12 * 1e3)
    assert floor.token_ms == floor.step_ms


def test_the_context_is_the_timed_windows_middle():
    assert window_context(2048, 13, 253) == 2048 + 133
    assert window_context(8, 5, 30) == 8 + 17
