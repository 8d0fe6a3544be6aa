"""Which Triton kernels a piece of code launches, and with which compile-time arguments.

A compiled Triton binary is one kernel at one set of ``tl.constexpr`` arguments (and,
on a GPU, the specializations of its other arguments). Two launches that differ there
run different binaries, whose float arithmetic the compiler schedules separately; on
the GPU that is where bitwise parity breaks (patch 0004's fp16 case). Under the Triton
interpreter two such launches can still compute the same numbers, so a test of a
"one binary" claim on CPU looks at the launches themselves.

``recorded_launches(*kernels)`` records every launch of ``kernels`` (JIT or interpreted
functions) through their own pre-run hooks, which Triton calls before each launch with
its arguments; the kernels run unchanged.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Launch:
    kernel: str
    constexprs: tuple[tuple[str, Any], ...]  # every tl.constexpr argument, defaults included
    args: dict[str, Any]  # every argument by name, as passed

    @property
    def scalars(self) -> tuple[tuple[str, float], ...]:
        """The float arguments (softmax and value scales): runtime values, not constexprs."""
        return tuple((k, v) for k, v in self.args.items() if isinstance(v, float))


@contextmanager
def recorded_launches(*kernels) -> Iterator[list[Launch]]:
    launches: list[Launch] = []
    hooks = []
    for kernel in kernels:
        params = inspect.signature(kernel.fn).parameters
        constexprs = [name for name, p in params.items() if "constexpr" in str(p.annotation)]

        def hook(*args, _kernel=kernel, _params=params, _constexprs=constexprs, **kwargs):
            bound = dict(zip(list(_params)[: len(args)], args, strict=True), **kwargs)
            values = tuple((name, bound.get(name, _params[name].default)) for name in _constexprs)
            launches.append(Launch(_kernel.fn.__name__, values, bound))

        kernel.add_pre_run_hook(hook)
        hooks.append((kernel, hook))
    try:
        yield launches
    finally:
        for kernel, hook in hooks:
            kernel.pre_run_hooks.remove(hook)
