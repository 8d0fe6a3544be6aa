"""A batch-invariant GEMM kernel's plumbing on the CPU (Triton interpreter): its product
against float64, and no write past row M."""

from __future__ import annotations

from collections.abc import Callable

import torch

# gemm(a [M, K], weight_t [K, N], out [M, N], bias [N] | None, config) -> out
Gemm = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, tuple], torch.Tensor
]


def assert_product_and_m_rows(
    gemm: Gemm, m: int, n: int, k: int, config: tuple, bias: bool, row_major: bool
) -> None:
    """``gemm`` over seeded fp32 operands (a row-major weight, or the transposed view of an
    [N, K] one) writes the product, with the bias, into the first M rows of a buffer and
    leaves the 5 rows after them untouched."""
    gen = torch.Generator().manual_seed(m)
    a = torch.randn(m, k, generator=gen)
    weight = torch.randn(n, k, generator=gen)
    b = torch.randn(n, generator=gen) if bias else None
    weight_t = weight.t().contiguous() if row_major else weight.t()
    buf = torch.full((m + 5, n), float("nan"))
    out = gemm(a, weight_t, buf[:m], b, config)
    expected = a.double() @ weight.double().t() + (b.double() if bias else 0)
    assert torch.allclose(out.double(), expected, rtol=1e-4, atol=1e-4)
    assert torch.isnan(buf[m:]).all()
