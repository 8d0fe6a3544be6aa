"""What the Triton interpreter's kernels load from given tensors, address by address.

``counted_loads(*tensors)`` wraps the interpreter's masked load (every ``tl.load`` goes
through it) and, for each tensor, counts how often each of its elements is loaded: only
the lanes a mask lets through, as a GPU issues them. These are issued loads, what a kernel
asks for. Where the loaded elements fill whole 32-byte sectors (a bf16 row of 256 does), a
GPU's caches can only lower what reaches DRAM, so the count bounds those bytes from above.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch
from triton.runtime import interpreter


@dataclass
class LoadCount:
    """Loads of one tensor's elements: how many times each address was loaded."""

    start: int  # the tensor's first byte
    end: int  # one past its last byte
    times: dict[int, int] = field(default_factory=dict)  # address -> loads

    @property
    def elements(self) -> int:
        """Element loads in all."""
        return sum(self.times.values())

    @property
    def distinct(self) -> int:
        return len(self.times)

    def add(self, addresses: np.ndarray) -> None:
        inside = addresses[(addresses >= self.start) & (addresses < self.end)]
        values, counts = np.unique(inside, return_counts=True)
        for address, count in zip(values.tolist(), counts.tolist(), strict=True):
            self.times[address] = self.times.get(address, 0) + count


def _extent(t: torch.Tensor) -> int:
    """Bytes from a view's first element to one past its last."""
    if t.numel() == 0:
        return 0
    last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride(), strict=True))
    return (last + 1) * t.element_size()


@contextmanager
def counted_loads(*tensors: torch.Tensor) -> Iterator[list[LoadCount]]:
    counts = [LoadCount(t.data_ptr(), t.data_ptr() + _extent(t)) for t in tensors]
    original = interpreter.InterpreterBuilder.create_masked_load

    def create_masked_load(self, ptrs, mask, other, *args, **kwargs):
        addresses = np.asarray(ptrs.data, dtype=np.int64)[np.asarray(mask.data, dtype=bool)]
        for count in counts:
            count.add(addresses)
        return original(self, ptrs, mask, other, *args, **kwargs)

    interpreter.InterpreterBuilder.create_masked_load = create_masked_load
    try:
        yield counts
    finally:
        interpreter.InterpreterBuilder.create_masked_load = original
