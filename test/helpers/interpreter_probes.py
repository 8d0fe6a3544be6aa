"""One probe per Triton interpreter fix: a kernel, and whether the interpreter got it right.

The tests run every probe with the fixes installed (each must agree) and, in a
fresh interpreter, without them (each must not: the fix is still needed).
``python -m helpers.interpreter_probes`` prints the probes' outcomes as JSON,
with no fix installed.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from unittest import mock

import torch
import triton
import triton.language as tl

exp_alias = tl.exp  # bound at import time, as sglang's fla/op.py binds `exp`


@triton.jit
def _alias_kernel(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(y_ptr + offs, exp_alias(tl.load(x_ptr + offs)))


@triton.jit
def _cast_kernel(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs).to(tl.bfloat16))


@triton.jit
def _bf16_mul_add_kernel(x_ptr, w_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    w = tl.load(w_ptr + offs)
    tl.store(y_ptr + offs, x * w + x)


@triton.jit
def _bf16_dot_kernel(x_ptr, w_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs[:, None] * N + offs[None, :])
    w = tl.load(w_ptr + offs[:, None] * N + offs[None, :])
    tl.store(y_ptr + offs[:, None] * N + offs[None, :], tl.dot(x, w))


@triton.jit
def _fp8_cast_kernel(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs).to(tl.float8e4nv))


@triton.autotune(
    configs=[triton.Config({}, num_warps=1), triton.Config({}, num_warps=2)], key=["N"]
)
@triton.jit
def _autotuned_copy_kernel(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


@triton.jit
def _nested_exp(x):
    return tl.exp(x)


@triton.jit
def _nested_call_kernel(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(y_ptr + offs, _nested_exp(tl.load(x_ptr + offs)) + tl.exp(tl.load(x_ptr + offs)))


def builtin_alias() -> bool:
    x = torch.linspace(-3, 3, 64)
    y = torch.empty_like(x)
    _alias_kernel[(1,)](x, y, N=64)
    # The interpreter's exp is numpy's; what matters is that the alias runs.
    return torch.allclose(y, x.exp(), rtol=1e-6, atol=0)


def fp32_to_bf16_cast() -> bool:
    # Values whose bf16 truncation differs from round-to-nearest-even.
    x = torch.tensor([1.0 + 2**-8 + 2**-9, 1.0 + 3 * 2**-9, -2.7182817, 1 / 3.0] * 4)
    y = torch.empty(x.shape, dtype=torch.bfloat16)
    _cast_kernel[(1,)](x, y, N=x.numel())
    return torch.equal(y, x.to(torch.bfloat16))


def bf16_arithmetic() -> bool:
    torch.manual_seed(0)
    x = torch.randn(128).to(torch.bfloat16)
    w = torch.randn(128).to(torch.bfloat16)
    y = torch.empty_like(x)
    _bf16_mul_add_kernel[(1,)](x, w, y, N=128)
    return torch.equal(y, x * w + x)


def bf16_dot() -> bool:
    torch.manual_seed(0)
    x = torch.randn(16, 16).to(torch.bfloat16)
    w = torch.randn(16, 16).to(torch.bfloat16)
    y = torch.empty(16, 16)
    _bf16_dot_kernel[(1,)](x, w, y, N=16)
    # bf16 products are exact in fp32; only the summation order may differ.
    return torch.allclose(y.double(), x.double() @ w.double(), rtol=0, atol=1e-5)


def fp8_cast() -> bool:
    """fp32 and bf16 -> float8_e4m3fn: to nearest even, saturating at 448, as the GPU casts
    (``cvt.rn.satfinite``) and as torch does."""
    # A carry into the exponent (1.96 -> 2, -0.49 -> -0.5), subnormals (below 2**-6), a tie,
    # beyond the largest finite value (448), and ordinary values.
    x = torch.tensor(
        [1.96, -0.49, 0.1240234375, 2**-7 + 2**-10, 3 * 2**-10, 0.0013, 1.0 + 2**-4, 460.0]
        + [-1e4, 0.0, -0.0, 7.3, -3.1, 0.3, 250.0, 2**-9]
    )
    for source in (x, x.to(torch.bfloat16)):
        y = torch.empty(x.shape, dtype=torch.float8_e4m3fn)
        _fp8_cast_kernel[(1,)](source, y, N=x.numel())
        expected = source.float().clamp(-448, 448).to(torch.float8_e4m3fn)
        if not torch.equal(y.view(torch.uint8), expected.view(torch.uint8)):
            return False
    return True


def autotune() -> bool:
    x = torch.arange(16, dtype=torch.float32)
    y = torch.zeros_like(x)
    _autotuned_copy_kernel[(1,)](x, y, N=16)
    return torch.equal(x, y)


def nested_calls_restored() -> bool:
    """Builtins are patched for nested calls and restored after every launch."""
    before = (tl.exp, tl.core.tensor.__add__, exp_alias)
    x = torch.linspace(-2, 2, 32)
    for _ in range(2):  # the second launch uses the listed builtins
        y = torch.empty_like(x)
        _nested_call_kernel[(1,)](x, y, N=32)
        if not torch.allclose(y, 2 * x.exp(), rtol=1e-6, atol=0):
            return False
    return (tl.exp, tl.core.tensor.__add__, exp_alias) == before


def builtins_listed_once() -> bool:
    """After a first launch, a launch no longer walks the language modules (the speed fix)."""
    x = torch.linspace(-2, 2, 32)
    y = torch.empty_like(x)
    _nested_call_kernel[(1,)](x, y, N=32)
    with mock.patch.object(inspect, "getmembers", wraps=inspect.getmembers) as getmembers:
        _nested_call_kernel[(1,)](x, y, N=32)
    return getmembers.call_count == 0


# Fix (as numbered in triton_interpreter_fixes) -> its probe.
PROBES: dict[str, Callable[[], bool]] = {
    "1 builtin aliases": builtin_alias,
    "2 fp32 -> bf16 casts": fp32_to_bf16_cast,
    "3 bf16 arithmetic": bf16_arithmetic,
    "4 autotuning": autotune,
    "5 bf16 tl.dot": bf16_dot,
    "6 launch cost": builtins_listed_once,
    "7 fp8 casts": fp8_cast,
}


def outcomes() -> dict[str, str]:
    """``agrees``, ``differs`` or ``raises: ...`` for every probe."""
    result = {}
    for name, probe in PROBES.items():
        try:
            result[name] = "agrees" if probe() else "differs"
        except Exception as exc:  # noqa: BLE001 (the outcome is the report)
            result[name] = f"raises: {type(exc).__name__}: {str(exc)[:200]}"
    return result


if __name__ == "__main__":
    print(json.dumps(outcomes()))
