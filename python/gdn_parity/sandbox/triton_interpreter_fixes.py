"""Fixes that make Triton's CPU interpreter (``TRITON_INTERPRET=1``) compute what the GPU computes.

The CPU runs of sglang's kernels (the test bed and ``gdn-parity demo --device
cpu``) install them before any kernel runs. Each fix changes the interpreter,
never the code under test. Each has a test that it works and a test that it is
still needed (the interpreter without it gets it wrong), in ``test/sandbox/``.
The fixes wrap private hooks of one Triton version: ``install`` refuses another
version, and names any hook that is gone, instead of running kernels wrongly.
(The torch fix the CPU runs also need is ``torch_cpu_device``.)

1. Builtin aliases. ``fla/op.py`` binds ``exp = tl.exp`` at import time. The
   compiler resolves such a global to the builtin; the interpreter only patches
   builtins reached through the ``triton.language`` modules, so calling the alias
   raises "Did you forget to add @triton.jit?". The fix patches builtins found in
   a kernel's globals the same way.
2. fp32 -> bf16 casts. The interpreter truncates the mantissa; the GPU rounds to
   nearest even. The fix converts through torch, which rounds to nearest even.
3. bf16 arithmetic. The interpreter stores bf16 as uint16 and applies numpy's
   float ops to the raw bits. The fix computes in fp32 and rounds the result to
   bf16 (to nearest even), as the GPU's bf16 instructions do for one operation.
4. Autotuning. ``@triton.autotune`` benchmarks every config through the GPU
   driver, and the interpreter has none ("0 active drivers"). The fix reports
   equal timings, so the first config (after pruning) runs. Which config runs
   only matters for speed on the GPU; no test compares interpreter numerics of
   an autotuned kernel with a GPU's.
5. bf16 ``tl.dot``. The interpreter multiplies the raw uint16 bits of bf16
   operands as integers, so the chunked prefill kernels (``chunk_gated_delta_rule``)
   return garbage states. The fix widens bf16 operands to fp32 (exactly) before
   the fp32-accumulated matmul, as the GPU's tensor cores compute bf16 products.
   fp32 operands are left as they are: the GPU may round them to TF32, the
   interpreter does not, so prefill is never bitwise-compared with a GPU.
6. Launch cost (speed only). On every launch, and on every call of a nested
   ``@triton.jit`` function, the interpreter walks ``triton.language`` with
   ``inspect.getmembers`` to find the builtins it patches, which is a quarter of
   the demo's run time. The fix lists each package's builtins once and patches
   the same members the same way.
7. Casts to fp8 (``x.to(tl.float8e4nv)``, ``tl.float8e5``). The interpreter rounds to
   nearest even but drops the carry into the exponent (1.96 becomes 1.0, -0.49 becomes
   -0.25) and truncates subnormals, so sglang's attention kernels, which cast q and the
   softmax weights to an FP8 KV cache's dtype before their dots, compute garbage. The fix
   converts through torch after clamping to the format's largest finite value: round to
   nearest even, saturating, as the GPU's ``cvt.rn.satfinite`` does.
"""

from __future__ import annotations

import inspect

import numpy as np
import torch
import triton
import triton.language as tl
from triton.runtime import autotuner
from triton.runtime import interpreter as interp

SUPPORTED_TRITON = "3.8."  # the minor version the fixes were written against (pyproject pins it)
# Every private hook the fixes wrap or replace: (owner, attribute).
HOOKS = (
    (interp, "_patch_builtin"),
    (interp, "_patch_lang"),
    (interp, "_patch_attr"),
    (interp, "interpreter_builder"),
    (interp, "TensorHandle"),
    (interp.InterpreterBuilder, "cast_impl"),
    (interp.InterpreterBuilder, "create_fp_trunc"),
    (interp.InterpreterBuilder, "binary_op"),
    (interp.InterpreterBuilder, "create_fadd"),
    (interp.InterpreterBuilder, "create_fmul"),
    (interp.InterpreterBuilder, "create_fdiv"),
    (interp.InterpreterBuilder, "create_fsub"),
    (interp.InterpreterBuilder, "create_dot"),
    (interp.InterpreterBuilder, "create_fp_to_fp"),
    (autotuner.Autotuner, "do_bench"),
)

_installed = False


class UnsupportedTriton(RuntimeError):
    """The installed Triton is not the one the fixes were written for."""


def check_triton(version: str = triton.__version__) -> None:
    """Refuse another Triton version, and a Triton without one of the hooks."""
    if not version.startswith(SUPPORTED_TRITON):
        raise UnsupportedTriton(
            f"the Triton interpreter fixes are written for Triton {SUPPORTED_TRITON}x, "
            f"not {version}: install the version pyproject.toml pins"
        )
    missing = [
        f"{getattr(owner, '__name__', owner)}.{name}"
        for owner, name in HOOKS
        if not hasattr(owner, name)
    ]
    if missing:
        raise UnsupportedTriton(f"Triton {version} lacks the interpreter hooks {missing}")


class _GlobalsView:
    """Lets ``_LangPatchScope`` set and restore entries of a globals dict."""

    def __init__(self, namespace: dict) -> None:
        object.__setattr__(self, "_ns", namespace)

    def __getattr__(self, name: str):
        try:
            return self._ns[name]
        except KeyError as exc:
            raise AttributeError(name) from exc

    def __setattr__(self, name: str, value) -> None:
        self._ns[name] = value

    def __delattr__(self, name: str) -> None:
        del self._ns[name]


def _patch_lang_with_aliases(original):
    aliases: dict[int, list[tuple[str, object]]] = {}

    def patched(fn):
        scope = original(fn)
        namespace = fn.__globals__
        if id(namespace) not in aliases:
            aliases[id(namespace)] = [
                (name, member) for name, member in namespace.items() if tl.core.is_builtin(member)
            ]
        view = _GlobalsView(namespace)
        for name, member in aliases[id(namespace)]:
            interp._patch_attr(view, name, member, interp.interpreter_builder, scope)
        return scope

    return patched


def _cached_builtins(original):
    """``_patch_builtin`` with each package's builtins listed once, not on every launch."""
    members: dict[int, list[tuple[str, object]]] = {}

    def patch_builtin(pkg, builder, scope):
        if id(pkg) not in members:
            members[id(pkg)] = [
                (name, member)
                for name, member in inspect.getmembers(pkg)
                if tl.core.is_builtin(member)
            ]
        for name, member in members[id(pkg)]:
            interp._patch_attr(pkg, name, member, builder, scope)

    return patch_builtin


def _bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _f32_to_bf16_bits(values: np.ndarray) -> np.ndarray:
    tensor = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32))
    return tensor.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


def _cast_impl(original):
    def cast_impl(self, src, dst_type):
        src_ty, dst_ty = src.dtype.scalar, dst_type.scalar
        if src_ty == tl.float32 and dst_ty == tl.bfloat16:
            return interp.TensorHandle(_f32_to_bf16_bits(src.data), tl.bfloat16)
        return original(self, src, dst_type)

    return cast_impl


def _binary_op(original):
    def binary_op(self, lhs, rhs, op):
        if lhs.dtype.scalar == tl.bfloat16 and rhs.dtype.scalar == tl.bfloat16:
            result = op(_bf16_bits_to_f32(lhs.data), _bf16_bits_to_f32(rhs.data))
            return interp.TensorHandle(_f32_to_bf16_bits(result), tl.bfloat16)
        return original(self, lhs, rhs, op)

    return binary_op


def _dot(original):
    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.dtype.scalar == tl.bfloat16 and b.dtype.scalar == tl.bfloat16:
            a = interp.TensorHandle(_bf16_bits_to_f32(a.data), tl.float32)
            b = interp.TensorHandle(_bf16_bits_to_f32(b.data), tl.float32)
        return original(self, a, b, d, input_precision, max_num_imprecise_acc)

    return create_dot


# Triton's fp8 types -> torch's (the interpreter stores both as uint8 bits).
_FP8 = {tl.float8e4nv: torch.float8_e4m3fn, tl.float8e5: torch.float8_e5m2}


def _to_f32(handle) -> np.ndarray:
    """A float handle's values as fp32 (exact for bf16, fp16 and fp32)."""
    if handle.dtype.scalar == tl.bfloat16:
        return _bf16_bits_to_f32(handle.data)
    return np.asarray(handle.data, dtype=np.float32)


def _fp_to_fp(original):
    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        dst = _FP8.get(dst_type.scalar)
        src_ty = src.dtype.scalar
        nearest = rounding_mode in (None, interp._ir.ROUNDING_MODE.RTNE)  # .to()'s default
        if dst is None or not nearest or src_ty not in (tl.float32, tl.float16, tl.bfloat16):
            return original(self, src, dst_type, rounding_mode)
        values = torch.from_numpy(np.ascontiguousarray(_to_f32(src)))
        limit = torch.finfo(dst).max
        bits = values.clamp(-limit, limit).to(dst).view(torch.uint8).numpy()
        return interp.TensorHandle(bits.reshape(np.shape(src.data)), dst_type.scalar)

    return create_fp_to_fp


def _equal_timings(kernel_call, quantiles=None, **kwargs):
    return [0.0] * len(quantiles) if quantiles else 0.0


def install() -> None:
    """Install the seven fixes (idempotent), after ``check_triton``."""
    global _installed
    if _installed:
        return
    check_triton()
    builder = interp.InterpreterBuilder
    interp._patch_builtin = _cached_builtins(interp._patch_builtin)
    interp._patch_lang = _patch_lang_with_aliases(interp._patch_lang)
    builder.cast_impl = _cast_impl(builder.cast_impl)
    builder.create_fp_trunc = lambda self, src, dst_type: self.cast_impl(src, dst_type)
    builder.binary_op = _binary_op(builder.binary_op)
    for name, op in (
        ("create_fadd", np.add),
        ("create_fmul", np.multiply),
        ("create_fdiv", np.divide),
        ("create_fsub", np.subtract),
    ):
        setattr(builder, name, lambda self, lhs, rhs, op=op: self.binary_op(lhs, rhs, op))
    builder.create_dot = _dot(builder.create_dot)
    builder.create_fp_to_fp = _fp_to_fp(builder.create_fp_to_fp)
    autotuner.Autotuner.do_bench = property(lambda self: _equal_timings)
    _installed = True
