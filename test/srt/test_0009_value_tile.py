"""Patches 0004 and 0009: packed decode's value-tile rule, as their messages state it.

0004 makes the tile batch-free where bits are promised; 0009 narrows it only on
SM90 (Hopper) with bf16 activations. Where bits are promised
(--gdn-verify-exact-parity, whose decode and verify launch the steps kernel) the
tile comes from the dtypes and shape alone: fp32 states take BV=4, 2-byte states
16, at every batch. Elsewhere fp32 states take BV=4 at every batch; 2-byte states
take 4 up to 48 x 128 value rows in the batch (requests x value heads x head
dim), 16 up to 384 x 128 and 32 beyond. Everything else keeps 0.5.23's tile: 32,
or 8 for its SM100 shape at batch 1 (not under the flag, where it would follow
the batch). Batch-invariant mode without the flag changes no tile. The expected
tiles below are that table, written out; the GPU check that every chosen tile
computes BV=32's bits is the patch's CUDA test.

The launches are recorded under the interpreter from the real wrappers, and from the real
GDNAttnBackend.forward_decode: the padded batch of a CUDA graph differs between a
Base and a speculative server serving the same requests, so under the flag a batch
of 1 and a batch of 100 must launch one binary.
"""

from __future__ import annotations

import pytest
import torch

from helpers.backend_rig import BackendRig, Shape, make_layer
from helpers.launches import recorded_launches
from helpers.sm90_probe import answer_sm90

BF16, FP16, FP32 = torch.bfloat16, torch.float16, torch.float32


def _rule(monkeypatch, sm90: bool):
    from sglang.kernels.ops.attention.fla import fused_recurrent

    answer_sm90(monkeypatch, sm90)
    return fused_recurrent._packed_block_v


def _tile(rule, n, hv, k, act, pool, batch_invariant=False):
    h = max(1, hv // 3)
    mixed = torch.empty(n, 2 * h * k + hv * k, dtype=act)
    state = torch.empty(1, hv, k, k, dtype=pool)
    return rule(mixed, state, n, batch_invariant)


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


BATCHES = (1, 2, 3, 4, 5, 6, 8, 9, 10, 12, 16, 24, 64, 128, 1024)


@pytest.mark.parametrize(
    ("sm90", "act", "pool", "tile"),
    [
        (True, BF16, FP32, 4),
        (True, BF16, BF16, 16),
        (True, BF16, FP16, 16),
        (True, FP16, BF16, 32),
        (False, BF16, BF16, 32),
        (False, BF16, FP32, 32),
    ],
)
@pytest.mark.parametrize("hv", [48, 24, 12, 6, 64, 32, 16, 8])
def test_under_the_flag_the_tile_does_not_follow_the_batch(
    sglang_tree, monkeypatch, sm90, act, pool, tile, hv
):
    rule = _rule(monkeypatch, sm90)
    assert {_tile(rule, n, hv, 128, act, pool, batch_invariant=True) for n in BATCHES} == {tile}


def test_sm100_batch_one_tile_is_not_taken_under_the_flag(sglang_tree, monkeypatch):
    """0.5.23's SM100 case narrows the tile at batch 1 only: under the flag it is skipped
    (0004). It asks ``get_platform().is_sm100`` (0009)."""
    from sglang.srt.utils import common

    rule = _rule(monkeypatch, False)
    monkeypatch.setattr(common, "is_sm100_supported", lambda: True)
    mixed = torch.empty(1, 2560, dtype=BF16)
    state = torch.empty(1, 12, 128, 128, dtype=FP32)
    assert rule(mixed, state, 1, False) == 8
    assert rule(mixed, state, 1, True) == 32


# --- the tile the real wrappers launch ------------------------------------------

HV, H, K = 4, 2, 16  # BV caps at 16; the batch rule picks 4 up to 96 requests, 16 beyond


def _launched_tiles(n: int, *, exact_parity: bool = False, verify_steps: int = 0) -> set[int]:
    from sglang.kernels.ops.attention.fla import fused_recurrent

    gen = torch.Generator().manual_seed(n)
    rows = n * max(verify_steps, 1)
    mixed = torch.randn(rows, 2 * H * K + HV * K, generator=gen).to(BF16)
    a = torch.randn(rows, HV, generator=gen).to(BF16)
    b = torch.randn(rows, HV, generator=gen).to(BF16)
    A_log, dt_bias = torch.randn(HV, generator=gen), torch.randn(HV, generator=gen)
    pool = torch.zeros(n, HV, K, K, dtype=BF16)
    indices = torch.arange(n, dtype=torch.int32)
    kernels = (
        fused_recurrent.fused_recurrent_gated_delta_rule_packed_decode_kernel,
        fused_recurrent.fused_recurrent_gated_delta_rule_packed_steps_kernel,
    )
    with recorded_launches(*kernels) as launches:
        if verify_steps:
            fused_recurrent.fused_recurrent_gated_delta_rule_packed_verify(
                mixed, a, b, A_log, dt_bias, K**-0.5, pool,
                torch.zeros(n, verify_steps, HV, K, K, dtype=BF16), indices, indices,
                num_steps=verify_steps,
            )  # fmt: skip
        else:
            fused_recurrent.fused_recurrent_gated_delta_rule_packed_decode(
                mixed, a, b, A_log, dt_bias, K**-0.5, pool,
                mixed.new_empty(n, 1, HV, K), indices, exact_parity=exact_parity,
            )  # fmt: skip
    return {dict(launch.constexprs)["BV"] for launch in launches}


def test_flag_decode_and_verify_launch_one_tile_at_any_batch(sglang_tree, monkeypatch):
    _rule(monkeypatch, True)
    tiles = {
        (n, steps): _launched_tiles(n, exact_parity=True, verify_steps=steps)
        for n in (1, 100)
        for steps in (0, 3)
    }
    assert all(launched == {16} for launched in tiles.values()), tiles


def _backend_decode_tiles(n: int) -> set[int]:
    """The tile ``GDNAttnBackend.forward_decode`` (a server's decode, flag off) launches for
    a batch of ``n`` requests."""
    from sglang.kernels.ops.attention.fla import fused_recurrent

    s = Shape(n=n, d=1, h=H, hv=HV, k=K, v=K)
    gen = torch.Generator().manual_seed(n)
    layer = make_layer(0, s, gen, "cpu")
    rig = BackendRig(0, s, torch.arange(n, dtype=torch.int32), BF16, "cpu")
    x = torch.randn(n, s.conv_dim, generator=gen).to(BF16)
    a = torch.randn(n, HV, generator=gen).to(BF16)
    b = torch.randn(n, HV, generator=gen).to(BF16)
    rids, positions = [f"r{i}" for i in range(n)], torch.arange(n)
    with recorded_launches(
        fused_recurrent.fused_recurrent_gated_delta_rule_packed_decode_kernel
    ) as launches:
        rig.decode(layer, x, a, b, rids, positions, torch.zeros(n, dtype=torch.long))
    return {dict(launch.constexprs)["BV"] for launch in launches}


def test_batch_invariant_mode_leaves_packed_decodes_tile(sglang_tree, monkeypatch):
    """Without the flag, batch-invariant mode (deterministic inference) changes no tile of
    packed decode through the server's forward_decode: it follows the batch as without
    the mode, so deterministic users who do not pass the flag see no change."""
    from sglang.srt.batch_invariant_ops import batch_invariant_ops

    _rule(monkeypatch, True)
    assert (_backend_decode_tiles(1), _backend_decode_tiles(100)) == ({4}, {16})
    monkeypatch.setattr(batch_invariant_ops, "_batch_invariant_MODE", True)
    assert (_backend_decode_tiles(1), _backend_decode_tiles(100)) == ({4}, {16})
