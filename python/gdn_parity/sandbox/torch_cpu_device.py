"""A device context on CPU, for sglang's fla ``input_guard`` on a machine without a GPU.

``input_guard`` enters ``torch.<device>.device(index)``; without a GPU it falls
back to ``torch.cpu``, which has no such context manager in torch 2.13. The fix
adds one that does nothing (a CPU has one device). It is a torch fix, not a
Triton one: it is needed whatever runs the kernels.
"""

from __future__ import annotations

import contextlib

import torch


def install() -> None:
    """Give ``torch.cpu`` a ``device(index)`` context when it has none (idempotent)."""
    if not hasattr(torch.cpu, "device"):
        torch.cpu.device = lambda index: contextlib.nullcontext()
