"""Patch 0013: batch-invariant mode's few-rows GEMM loads wide weights through TMA at
193-256 rows: its rule, its dispatch and its kernels' plumbing.

The rule (``_few_rows_tma_tile``) must take only the GEMMs the patch names (193-256
rows, a 2-byte weight of at least 5120 columns stored [N, K], K >= 5120, M * N < 2**31,
operands a TMA descriptor can read), give each width the tile the patch names (a
vocabulary-sized weight the persistent form) and keep the persistent kernel's K chunk,
so that the zero-padded K, and with it a row's bits, stay the persistent kernel's. The
kernels run under the Triton interpreter, whose TMA loads fill outside the matrices with
zeros as a GPU's do: the product against float64, the bias, and no write past row M.
That their rows equal the persistent kernel's at every M on a GPU is the CUDA test of
0009 as 0013 extends it, on SM90.
"""

from __future__ import annotations

import pytest
import torch

from helpers.gemm_rows import assert_product_and_m_rows
from helpers.registered_lists import literal_lists

BF16, FP16, FP32 = torch.bfloat16, torch.float16, torch.float32
# The rule's tiles: (BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, num_warps, num_stages,
# persistent), as the commit message states them.
NARROWER, WIDER = (64, 128, 64, 4, 4, False), (128, 128, 64, 8, 3, False)
WIDER_4_STAGES, VOCABULARY = (128, 128, 64, 8, 4, False), (128, 256, 64, 8, 3, True)
TILES = (NARROWER, WIDER, WIDER_4_STAGES, VOCABULARY)
H100_SMS = 132


@pytest.fixture
def bio(sglang_tree, monkeypatch):
    from sglang.srt.batch_invariant_ops import batch_invariant_ops

    monkeypatch.setattr(batch_invariant_ops, "_few_rows_device", lambda a: True)
    # An H100's or H200's SMs: the stages of the 128 x 128 tile follow the SM count.
    monkeypatch.setattr(batch_invariant_ops, "get_device_core_count", lambda: H100_SMS)
    return batch_invariant_ops


def _tma_tile(bio, m, n, k, dtype=BF16, row_major=False, a_offset=0, out_dtype=None):
    """The rule's answer for A [m, k] (``a_offset`` elements into its storage) times the
    [k, n] view of an [n, k] weight (a [k, n] row-major one with ``row_major``), into an
    output of ``out_dtype`` (default: the operands')."""
    a = torch.empty(m * k + a_offset, dtype=dtype)[a_offset:].view(m, k)
    b = torch.empty(k, n, dtype=dtype) if row_major else torch.empty(n, k, dtype=dtype).t()
    return bio._few_rows_tma_tile(a, b, m, n, k, out_dtype or dtype)


@pytest.mark.parametrize(
    ("m", "n", "k", "tile"),
    [  # Qwen3.5-27B's wide weights at verify sizes, as the commit message states the rule
        (256, 5120, 17408, NARROWER),  # down
        (193, 5120, 6144, NARROWER),  # o_proj
        (256, 14336, 5120, WIDER),  # qkv with its gate: 224 tiles of 128 x 128
        (256, 16384, 5120, WIDER),  # in_proj_qkvz: 256 tiles
        (200, 34816, 5120, WIDER_4_STAGES),  # gate_up: 544 tiles
        (256, 248320, 5120, VOCABULARY),  # lm_head
        (256, 5120, 5120, NARROWER),  # the smallest weight measured
        (256, 8191, 5120, NARROWER),
        # 3 stages where the tiles need two programs per SM to fit one wave: 132 SMs
        (256, 8192, 28672, WIDER_4_STAGES),  # 128 tiles (a 70B-class down projection)
        (256, 8448, 5120, WIDER_4_STAGES),  # 132
        (256, 8449, 5120, WIDER),  # 134
        (193, 16896, 5120, WIDER),  # 264
        (256, 16897, 5120, WIDER_4_STAGES),  # 266
        (256, 65535, 5120, WIDER_4_STAGES),
        (256, 65536, 5120, VOCABULARY),
    ],
)
def test_the_wide_weights_take_the_tma_tiles(bio, m, n, k, tile):
    assert _tma_tile(bio, m, n, k) == tile
    assert _tma_tile(bio, m, n, k, FP16) == tile


def test_the_stages_follow_the_sm_count(bio, monkeypatch):
    """qkv with its gate at 256 rows has 224 tiles of 128 x 128: one wave of two programs
    per SM on 132 SMs (3 stages), not on 78 (4 stages)."""
    assert _tma_tile(bio, 256, 14336, 5120) == WIDER
    monkeypatch.setattr(bio, "get_device_core_count", lambda: 78)
    assert _tma_tile(bio, 256, 14336, 5120) == WIDER_4_STAGES


@pytest.mark.parametrize(
    ("m", "n", "k", "kwargs"),
    [
        (192, 5120, 17408, {}),  # 192 rows and fewer keep the pointer tiles
        (1, 34816, 5120, {}),
        (256, 5119, 5120, {}),  # narrower than any weight measured
        (256, 4096, 14336, {}),  # an 8B-class down projection: not measured
        (256, 96, 5120, {}),
        (256, 5120, 5119, {}),  # shallower than any weight measured
        (256, 14336, 4096, {}),
        (256, 3072, 1024, {}),  # a 1024-wide model's
        (256, 5120, 6144, {"dtype": FP32}),  # fp32 keeps its own K chunk (32)
        (256, 5120, 6144, {"row_major": True}),  # a [K, N] weight: no TMA box of it
        (256, 5120, 6144, {"a_offset": 4}),  # A's base 8 bytes off 16
    ],
)
def test_other_gemms_keep_the_pointer_kernel(bio, m, n, k, kwargs):
    assert _tma_tile(bio, m, n, k, **kwargs) is None


def test_a_row_stride_off_16_bytes_keeps_the_pointer_kernel(bio):
    """A's rows 6148 elements apart (a view of a wider activation): 12296 bytes, not a
    multiple of 16; 6152 apart (12304 bytes) is."""
    for width, expected in ((6148, None), (6152, NARROWER)):
        a = torch.empty(256, width, dtype=BF16)[:, :6144]
        b = torch.empty(5120, 6144, dtype=BF16).t()
        assert bio._few_rows_tma_tile(a, b, 256, 5120, 6144, BF16) == expected


def test_outputs_past_32_bit_offsets_keep_the_pointer_kernel(bio):
    """The kernel's output offsets are 32-bit: M * N must stay under 2**31. (The weight is
    one row broadcast, so no 2**31-element tensor is allocated; its stride passes the
    descriptor's checks.)"""
    n = 2**31 // 200 + 1
    a = torch.empty(200, 5120, dtype=BF16)
    b = torch.empty(1, 5120, dtype=BF16).expand(n, 5120).t()
    assert bio._few_rows_tma_tile(a, b, 200, n, 5120, BF16) is None
    assert bio._few_rows_tma_tile(a[:193], b, 193, n, 5120, BF16) == VOCABULARY


def test_an_output_the_pointer_kernel_casts_through_fp16_keeps_it(bio):
    """The TMA tile casts to the output's dtype, which is the pointer kernel's cast for
    bf16, fp16 and fp32 outputs (an fp32 output of bf16 operands: torch.mm's out_dtype
    overload) but not for others, which that kernel casts through fp16."""
    assert _tma_tile(bio, 256, 5120, 17408, out_dtype=FP32) == NARROWER
    assert _tma_tile(bio, 256, 5120, 17408, out_dtype=torch.float8_e5m2) is None


@pytest.mark.parametrize("dtype", [BF16, FP16])
def test_the_tma_tile_stores_the_pointer_kernels_bits(bio, dtype):
    """At one tile, the TMA kernel and the pointer kernel add the same K chunks in the same
    order and cast alike, so they store the same bits, bias included. (The interpreter
    multiplies the TMA kernel's transposed weight tile in another order inside a chunk,
    which can move an fp32 sum's last bit; a 2-byte output hides that here. On SM90 the
    CUDA test compares every output dtype at every row count.)"""
    out_dtype = dtype
    gen = torch.Generator().manual_seed(7)
    m, n, k = 20, 48, 160
    a = torch.randn(m, k, generator=gen).to(dtype)
    weight = torch.randn(n, k, generator=gen).to(dtype)
    bias = torch.randn(n, generator=gen).to(dtype)
    tma = bio._matmul_few_rows_tma(
        a, weight.t(), torch.empty(m, n, dtype=out_dtype), bias, (16, 16, 32, 2, 2, False)
    )
    pointer = bio._matmul_few_rows_triton(
        a, weight.t(), torch.empty(m, n, dtype=out_dtype), bias, (16, 16, 32, 2, 2)
    )
    assert torch.equal(tma, pointer)


def test_the_switch_keeps_the_pointer_kernel(bio, monkeypatch):
    monkeypatch.setattr(bio, "_ENABLE_MM_TMA", False)
    assert _tma_tile(bio, 256, 5120, 17408) is None


@pytest.mark.parametrize("dtype", [BF16, FP16])
def test_the_k_chunk_is_the_persistent_kernels(bio, dtype):
    base = bio._MATMUL_PERSISTENT_CONFIGS[dtype]["BLOCK_SIZE_K"]
    for tile in TILES:
        assert tile[2] == base
        bm, bn, bk, _, stages, _ = tile
        assert (bm + bn) * bk * dtype.itemsize * stages <= bio._SMEM_BUDGET


class _Served(Exception):
    """Raised by a stand-in launcher: which one the dispatch called, and its tile."""


def _served_by(bio, monkeypatch, m, n, k, row_major=False):
    """Which launcher ``_matmul_persistent_triton`` calls for A [m, k] (bf16) and its tile:
    the launchers are replaced by ones that raise, so no kernel runs on the CPU."""

    def launcher(name):
        def launch(a, b, c, bias, tile):
            raise _Served(name, tile)

        return launch

    monkeypatch.setattr(bio, "_matmul_few_rows_tma", launcher("tma"))
    monkeypatch.setattr(bio, "_matmul_few_rows_triton", launcher("pointer"))
    a = torch.empty(m, k, dtype=BF16)
    b = torch.empty(k, n, dtype=BF16) if row_major else torch.empty(n, k, dtype=BF16).t()
    with pytest.raises(_Served) as served:
        bio._matmul_persistent_triton(a, b, BF16)
    return served.value.args


def test_the_dispatch_sends_the_rules_gemms_to_the_tma_kernel(bio, monkeypatch):
    assert _served_by(bio, monkeypatch, 256, 5120, 17408) == ("tma", NARROWER)
    assert _served_by(bio, monkeypatch, 193, 34816, 5120) == ("tma", WIDER_4_STAGES)
    assert _served_by(bio, monkeypatch, 256, 248320, 5120) == ("tma", VOCABULARY)
    assert _served_by(bio, monkeypatch, 192, 5120, 17408)[0] == "pointer"
    assert _served_by(bio, monkeypatch, 256, 5120, 17408, row_major=True)[0] == "pointer"


def test_more_rows_than_the_few_rows_kernels_take_keep_the_persistent_kernel(bio):
    assert _tma_tile(bio, 257, 5120, 17408) == NARROWER  # the rule alone would take it
    assert bio._few_rows_tile(torch.empty(257, 17408, dtype=BF16), 257, 5120, 17408) is None


REGISTERED = "test/registered/kernels/ops/gemm/test_batch_invariant_mm_few_rows.py"


def test_the_cuda_test_runs_every_tma_tile_at_every_tma_row_count(bio, sglang_tree):
    """The registered test's shapes (bf16 at every M from 1 to 512) include one for each
    TMA tile, so each runs at every row count 193-256 there against the persistent kernel."""
    shapes = literal_lists(sglang_tree / REGISTERED)["SHAPES"]
    for m in range(bio.FEW_ROWS_TMA_MIN_M, bio.FEW_ROWS_MAX_M + 1):
        tested = {_tma_tile(bio, m, n, k) for n, k in shapes}
        assert set(TILES) <= tested, m


@pytest.mark.parametrize(
    ("m", "n", "k", "tile", "bias"),
    [
        (3, 40, 200, (16, 16, 64, 2, 2, False), True),  # N and K off the tile: zero fill
        (20, 36, 128, (16, 32, 32, 2, 2, False), False),  # two M tiles
        (5, 96, 256, (64, 64, 64, 4, 2, False), True),  # one M tile, mostly outside
        # The persistent form on 3 "SMs": 2 x 3 tiles (then 1 x 7), so programs loop
        # over tiles of both M tiles (then of one, the last column tile partial).
        (20, 48, 128, (16, 16, 32, 2, 2, True), True),
        (5, 100, 200, (16, 16, 64, 2, 2, True), False),
    ],
)
def test_the_tma_kernels_compute_the_product_and_write_m_rows(
    bio, monkeypatch, m, n, k, tile, bias
):
    monkeypatch.setattr(bio, "get_device_core_count", lambda: 3)
    assert_product_and_m_rows(bio._matmul_few_rows_tma, m, n, k, tile, bias, row_major=False)
