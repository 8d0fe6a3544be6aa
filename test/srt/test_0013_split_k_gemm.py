"""Patch 0013: batch-invariant mode's split-K GEMM for narrow weights, its plan and its
kernels' plumbing.

A row stays batch-invariant only if the split does not follow the row count: the plan's
K_PER_SPLIT must depend on K alone, every K chunk a tile can pick must divide it (so
each split runs the same zero-padded K whatever the tile), and the plan must cover the
weights the patch names and no others. The split-K is opt-in
(``SGLANG_BATCH_INVARIANT_OPS_ENABLE_MM_SPLIT_K``, off by default: switching it on
changes those layers' bits once); the tests below switch it on, after one checks the
default. The device gate (``get_platform().is_sm90``) is answered here as 0010's test
answers it, so the plan can be checked on the CPU. The kernels run under the Triton
interpreter: the product against float64, the bias, a row-major weight, and no write
past row M. That the rows are the same at every M on a GPU is the patch's CUDA test,
on SM90.
"""

from __future__ import annotations

import pytest
import torch

from helpers.gemm_rows import assert_product_and_m_rows
from helpers.registered_lists import literal_lists
from helpers.sm90_probe import answer_sm90

BF16, FP16, FP32 = torch.bfloat16, torch.float16, torch.float32
ROWS = list(range(1, 513)) + [1024, 1500, 2048, 4096, 8192]


@pytest.fixture
def bio_default(sglang_tree, monkeypatch):
    """The module on a stand-in SM90, its switches as the environment left them."""
    from sglang.srt.batch_invariant_ops import batch_invariant_ops

    answer_sm90(monkeypatch, True)
    return batch_invariant_ops


@pytest.fixture
def bio(bio_default, monkeypatch):
    """The same, the split-K switched on."""
    monkeypatch.setattr(bio_default, "_ENABLE_MM_SPLIT_K", True)
    return bio_default


def _plan(bio, m, n, k, dtype=BF16):
    return bio._split_k_plan(torch.empty(1, k, dtype=dtype), m, n, k)


def test_the_split_k_is_opt_in(bio_default, monkeypatch):
    from sglang.srt.environ import envs

    monkeypatch.delenv("SGLANG_BATCH_INVARIANT_OPS_ENABLE_MM_SPLIT_K", raising=False)
    assert envs.SGLANG_BATCH_INVARIANT_OPS_ENABLE_MM_SPLIT_K.get() is False
    assert bio_default._ENABLE_MM_SPLIT_K is False
    assert _plan(bio_default, 1, 96, 5120) is None


def test_the_plan_covers_narrow_weights_with_a_long_k_only(bio, monkeypatch):
    assert _plan(bio, 1, 96, 5120) is not None
    assert _plan(bio, 8192, 256, 4096) is not None
    assert _plan(bio, 1, 257, 5120) is None
    assert _plan(bio, 1, 96, 4095) is None
    assert _plan(bio, 1, 96, 5120, torch.int8) is None
    monkeypatch.setattr(bio, "_ENABLE_MM_SPLIT_K", False)
    assert _plan(bio, 1, 96, 5120) is None


@pytest.mark.parametrize("dtype", [BF16, FP16, FP32])
def test_the_split_follows_k_alone_and_every_chunk_divides_it(bio, dtype):
    for k in (4096, 4097, 4160, 5120, 6000, 7168, 17408):
        for n in (16, 96, 200, 256):
            plans = {m: _plan(bio, m, n, k, dtype) for m in ROWS}
            per = {p[0] for p in plans.values()}
            assert len(per) == 1, (n, k, per)
            (k_per_split,) = per
            assert k_per_split % bio.SPLIT_K_GRANULE == 0
            assert -(-k // k_per_split) == bio.SPLIT_K_SPLITS, (k, k_per_split)
            for _, bm, bn, bk, _, stages in plans.values():
                assert k_per_split % bk == 0
                assert (bm + bn) * bk * dtype.itemsize * stages <= bio._SMEM_BUDGET


def test_the_gemm_takes_the_split_before_the_few_rows_kernel(bio, monkeypatch):
    calls = []
    monkeypatch.setattr(bio, "_matmul_split_k_triton", lambda *args: calls.append("split"))
    monkeypatch.setattr(bio, "_matmul_few_rows_triton", lambda *args: calls.append("few"))
    for m, n in ((1, 96), (200, 96), (1, 257)):
        bio._matmul_persistent_triton(torch.empty(m, 5120), torch.empty(5120, n), FP32)
    assert calls == ["split", "split", "few"]


REGISTERED = "test/registered/unit/batch_invariant_ops/test_batch_invariant_mm_split_k.py"


def _registered_lists(tree) -> dict[str, list]:
    """SHAPES, SPREAD and PREFILL as the registered CUDA test defines them."""
    return literal_lists(tree / REGISTERED)


@pytest.mark.parametrize("dtype", [BF16, FP16, FP32])
def test_the_cuda_test_runs_every_tile_the_plan_can_pick(bio, sglang_tree, dtype):
    lists = _registered_lists(sglang_tree)
    possible = {
        _plan(bio, m, n, k, dtype)[1:] for m in ROWS for n in (16, 256) for k in (4096, 17408)
    }
    rows = list(range(1, 513)) if dtype == BF16 else lists["SPREAD"]
    tested = {
        _plan(bio, m, n, k, dtype)[1:] for m in rows + lists["PREFILL"] for n, k in lists["SHAPES"]
    }
    assert len(possible) == 5 and possible <= tested, sorted(possible - tested)


@pytest.mark.parametrize(
    ("m", "n", "k", "plan", "bias", "row_major"),
    [
        (3, 40, 700, (256, 16, 16, 64, 2, 2), True, False),  # 3 splits, the last short
        (20, 33, 520, (256, 16, 32, 128, 2, 2), False, True),  # two M tiles, row-major
    ],
)
def test_the_kernels_compute_the_product_and_write_m_rows(bio, m, n, k, plan, bias, row_major):
    assert_product_and_m_rows(bio._matmul_split_k_triton, m, n, k, plan, bias, row_major)


def test_the_64_bit_offsets_compute_the_same_product(bio):
    """The paths for more than 2**31 partial elements (int64 offsets) cannot be reached
    with a CPU's memory: the kernels run here with those paths forced on, small."""
    import triton

    gen = torch.Generator().manual_seed(0)
    m, n, k, per = 5, 20, 600, 256
    a, weight = torch.randn(m, k, generator=gen), torch.randn(n, k, generator=gen)
    bias = torch.randn(n, generator=gen)
    splits = -(-k // per)
    partial = torch.empty(splits, m, n)
    bio.matmul_kernel_split_k[(1, 2, splits)](
        a, weight.t(), partial, m, n, k, per, a.stride(0), a.stride(1), 1, k,
        BLOCK_SIZE_M=16, BLOCK_SIZE_N=16, BLOCK_SIZE_K=64,
        A_LARGE=True, B_LARGE=True, P_LARGE=True,
    )  # fmt: skip
    out = torch.empty(m, n)
    bio._split_k_reduce_kernel[(triton.cdiv(m * n, 64),)](
        partial, out, bias, m, n, out.stride(0), out.stride(1),
        SPLITS=splits, BLOCK=64, P_LARGE=True, HAS_BIAS=True,
    )  # fmt: skip
    expected = a.double() @ weight.double().t() + bias.double()
    assert torch.allclose(out.double(), expected, rtol=1e-4, atol=1e-4)


def test_the_switch_off_sm90_is_ignored_with_one_warning(bio_default, monkeypatch, caplog):
    """SGLANG_BATCH_INVARIANT_OPS_ENABLE_MM_SPLIT_K=1 off SM90: no split-K, one warning."""
    monkeypatch.setattr(bio_default, "_ENABLE_MM_SPLIT_K", True)
    answer_sm90(monkeypatch, False)
    bio_default.print_warning_once.cache_clear()
    a = torch.empty(4, 5120, dtype=torch.bfloat16)
    with caplog.at_level("WARNING", logger="sglang.srt.utils.common"):
        plans = [bio_default._split_k_plan(a, 4, 96, 5120) for _ in range(3)]
    assert plans == [None] * 3
    ignored = [r for r in caplog.records if "ENABLE_MM_SPLIT_K=1 is ignored" in r.message]
    assert len(ignored) == 1
