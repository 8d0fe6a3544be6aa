"""Patch 0007: packed decode's value-tile rule, as its commit message states it.

The rule narrows the tile only on SM90 (Hopper) with bf16 activations: fp32 states
take BV=4 at every batch; 2-byte states take 4 up to 48 x 128 value rows in the
batch (requests x value heads x head dim), 16 up to 384 x 128 and 32 beyond.
Everything else keeps 0.5.23's tile: 32, or 8 for its SM100 shape. The expected
tiles below are that table, written out; the GPU check that every chosen tile
computes BV=32's bits is the patch's CUDA test.
"""

from __future__ import annotations

import pytest
import torch

BF16, FP16, FP32 = torch.bfloat16, torch.float16, torch.float32


def _rule(monkeypatch, sm90: bool):
    from sglang.kernels.ops.attention.fla import fused_recurrent

    monkeypatch.setattr(fused_recurrent, "_is_sm90", lambda device: sm90)
    return fused_recurrent._packed_block_v


def _tile(rule, n, hv, k, act, pool):
    h = max(1, hv // 3)
    mixed = torch.empty(n, 2 * h * k + hv * k, dtype=act)
    state = torch.empty(1, hv, k, k, dtype=pool)
    return rule(mixed, state, n)


@pytest.mark.parametrize(
    ("n", "hv", "pool", "tile"),
    [
        (1, 48, FP32, 4),
        (128, 48, FP32, 4),
        (4, 12, BF16, 4),  # 48 value heads of 128
        (1, 48, BF16, 4),
        (2, 48, BF16, 16),  # 96
        (8, 48, FP16, 16),  # 384
        (9, 48, BF16, 32),  # 432
        (128, 12, BF16, 32),
    ],
)
def test_sm90_bf16_activations_follow_the_table(sglang_tree, monkeypatch, n, hv, pool, tile):
    assert _tile(_rule(monkeypatch, True), n, hv, 128, BF16, pool) == tile


def test_value_rows_count_the_head_dim(sglang_tree, monkeypatch):
    rule = _rule(monkeypatch, True)
    # 8 requests x 12 heads x 64 rows = 48 x 128 value rows: the narrowest tile.
    assert _tile(rule, 8, 12, 64, BF16, BF16) == 4
    assert _tile(rule, 8, 12, 128, BF16, BF16) == 16


@pytest.mark.parametrize("pool", [BF16, FP16, FP32])
def test_fp16_activations_keep_bv32(sglang_tree, monkeypatch, pool):
    rule = _rule(monkeypatch, True)
    assert {_tile(rule, n, 48, 128, FP16, pool) for n in (1, 4, 64)} == {32}


def test_other_gpus_keep_bv32(sglang_tree, monkeypatch):
    rule = _rule(monkeypatch, False)
    assert {_tile(rule, n, 48, 128, BF16, FP32) for n in (1, 4, 64)} == {32}


def test_small_head_dim_caps_the_tile(sglang_tree, monkeypatch):
    rule = _rule(monkeypatch, False)
    assert _tile(rule, 1, 4, 16, BF16, BF16) == 16
