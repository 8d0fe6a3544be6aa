"""Patch 0010: batch-invariant mode's few-rows GEMM, its tile rule and its kernel's plumbing.

The rule (``_few_rows_tile``) must never make the zero-padded K longer than the
persistent kernel's (a longer one adds zero steps, which can turn a -0.0 sum into
+0.0), must fit shared memory, and must leave GEMMs of more than FEW_ROWS_MAX_M rows
to the persistent kernel. Its device gate (``get_platform().is_sm90``) is answered
here as 0009's test answers it, so the table can be checked on the CPU. The kernel
runs under the Triton interpreter: its rows against float64, and no write past row M.
That a row's bits equal the persistent kernel's at every M is the patch's CUDA test,
on SM90.
"""

from __future__ import annotations

import math

import pytest
import torch

from helpers.gemm_rows import assert_product_and_m_rows
from helpers.registered_lists import literal_lists
from helpers.sm90_probe import answer_sm90

BF16, FP16, FP32 = torch.bfloat16, torch.float16, torch.float32


@pytest.fixture
def bio(sglang_tree, monkeypatch):
    from sglang.srt.batch_invariant_ops import batch_invariant_ops

    answer_sm90(monkeypatch, True)
    return batch_invariant_ops


def _tile(bio, m, n, k, dtype=BF16):
    return bio._few_rows_tile(torch.empty(m, k, dtype=dtype), m, n, k)


def test_rows_above_the_limit_keep_the_persistent_kernel(bio):
    assert bio.FEW_ROWS_MAX_M == 256
    assert _tile(bio, 256, 5120, 5120) is not None
    assert _tile(bio, 257, 5120, 5120) is None
    assert _tile(bio, 1, 5120, 5120, torch.int8) is None


def test_the_switch_keeps_the_persistent_kernel(bio, monkeypatch):
    monkeypatch.setattr(bio, "_ENABLE_MM_FEW_ROWS", False)
    assert _tile(bio, 1, 5120, 5120) is None


@pytest.mark.parametrize(
    ("m", "n", "k", "tile"),
    [  # the rule as 0010's commit message and docs state it, Qwen3.5-27B's shapes
        (1, 16384, 5120, (16, 64, 128, 2, 4)),
        (4, 5120, 17408, (16, 64, 256, 4, 4)),
        (16, 5120, 6144, (16, 64, 256, 4, 4)),
        (17, 5120, 6144, (16, 32, 256, 2, 4)),
        (16, 1024, 1024, (16, 16, 256, 2, 4)),
        (1, 96, 5120, (16, 16, 512, 2, 4)),
        (64, 96, 5120, (16, 16, 512, 2, 4)),
        (65, 96, 5120, (64, 32, 128, 4, 5)),
        (32, 34816, 5120, (32, 64, 128, 2, 4)),
        (32, 5120, 6144, (16, 32, 256, 2, 4)),
        (64, 248320, 5120, (64, 128, 128, 4, 4)),
        (64, 5120, 17408, (64, 64, 128, 4, 5)),
        (128, 16384, 5120, (128, 128, 128, 8, 3)),
        (256, 16384, 5120, (128, 128, 64, 8, 3)),
        (192, 5120, 6144, (64, 128, 128, 4, 4)),
        (256, 5120, 17408, (128, 128, 128, 8, 3)),
    ],
)
def test_tiles_follow_the_rule(bio, m, n, k, tile):
    assert _tile(bio, m, n, k) == tile


@pytest.mark.parametrize("dtype", [BF16, FP16, FP32])
def test_the_padded_k_is_the_persistent_kernels_and_shared_memory_fits(bio, dtype):
    base = bio._MATMUL_PERSISTENT_CONFIGS[dtype]["BLOCK_SIZE_K"]
    for m in (1, 17, 33, 65, 200):
        for n in (16, 96, 1000, 5120, 16384):
            for k in (16, 64, 100, 128, 192, 1000, 4160, 5120, 6144, 17408):
                bm, bn, bk, _, stages = _tile(bio, m, n, k, dtype)
                assert bk % base == 0
                assert math.ceil(k / bk) * bk == math.ceil(k / base) * base, (m, n, k, bk)
                assert (bm + bn) * bk * dtype.itemsize * stages <= bio._SMEM_BUDGET


REGISTERED = "test/registered/unit/batch_invariant_ops/test_batch_invariant_mm_few_rows.py"


def _registered_lists(tree) -> tuple[list, list]:
    """SHAPES and SPREAD as the registered CUDA test defines them."""
    names = literal_lists(tree / REGISTERED)
    return names["SHAPES"], names["SPREAD"]


@pytest.mark.parametrize("dtype", [BF16, FP16, FP32])
def test_the_cuda_test_runs_every_tile_the_rule_can_pick(bio, sglang_tree, dtype):
    """Every tile the rule picks at M <= 256 over a grid of widths and depths (K chunks
    narrow with K), the registered test runs at one of its shapes: bf16 at every M,
    fp16 and fp32 at its spread of M."""
    shapes, spread = _registered_lists(sglang_tree)
    rows = range(1, bio.FEW_ROWS_MAX_M + 1)
    widths = (16, 96, 200, 256, 257, 1000, 1024, 2048, 5120, 8192, 16384, 248320)
    depths = (64, 96, 128, 160, 192, 320, 1000, 1024, 1088, 2176, 2880, 4160, 5120, 17408)
    possible = {_tile(bio, m, n, k, dtype) for m in rows for n in widths for k in depths}
    tested_rows = rows if dtype == BF16 else spread
    tested = {_tile(bio, m, n, k, dtype) for m in tested_rows for n, k in shapes}
    assert len(possible) >= 20 and possible <= tested, sorted(possible - tested)


@pytest.mark.parametrize(
    ("m", "n", "k", "tile", "bias", "row_major"),
    [
        (3, 40, 200, (16, 16, 64, 2, 2), True, False),  # N and K off the tile
        (20, 33, 130, (16, 32, 128, 2, 2), False, True),  # two M tiles, a row-major weight
        (5, 96, 256, (64, 64, 128, 4, 2), True, False),
    ],
)
def test_the_kernel_computes_the_product_and_writes_m_rows(bio, m, n, k, tile, bias, row_major):
    assert_product_and_m_rows(bio._matmul_few_rows_triton, m, n, k, tile, bias, row_major)
