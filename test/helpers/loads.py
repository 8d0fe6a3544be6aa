"""What the Triton interpreter's kernels load from given tensors, address by address.

``counted_loads(*tensors)`` wraps the interpreter's masked load (every ``tl.load`` goes
through it) and, for each tensor, counts how often each of its bytes' elements is loaded:
only the lanes a mask lets through, as a GPU issues them. It counts issued loads, the
bytes a kernel asks for; a GPU's caches may serve some of them, so these are an upper
bound on what reaches DRAM from these tensors.
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

    start: int  # the storage's first byte
    nbytes: int
    element_size: int
    times: dict[int, int] = field(default_factory=dict)  # address -> loads

    @property
    def elements(self) -> int:
        """Element loads in all."""
        return sum(self.times.values())

    @property
    def distinct(self) -> int:
        return len(self.times)

    def add(self, addresses: np.ndarray) -> None:
        inside = addresses[(addresses >= self.start) & (addresses < self.start + self.nbytes)]
        values, counts = np.unique(inside, return_counts=True)
        for address, count in zip(values.tolist(), counts.tolist(), strict=True):
            self.times[address] = self.times.get(address, 0) + count


@contextmanager
def counted_loads(*tensors: torch.Tensor) -> Iterator[list[LoadCount]]:
    counts = [
        LoadCount(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes(), t.element_size())
        for t in tensors
    ]
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
