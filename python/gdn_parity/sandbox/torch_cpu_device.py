"""A device context on CPU, for sglang's fla ``input_guard`` on a machine without a GPU.

``input_guard`` enters ``torch.<device>.device(index)``; without a GPU it falls
back to ``torch.cpu``, which has no such context manager in torch 2.13. The fix
adds one that does nothing (a CPU has one device). It is a torch fix, not a
Triton one: it is needed whatever runs the kernels.

fla's ``layernorm_gated`` sizes its row blocks from
``torch.cuda.get_device_properties(x.device).multi_processor_count``; for a
CPU tensor the fix answers with an H200's SM count, the GPU the harness's
numbers are for, so the CPU runs pick the block size the server picks there.
"""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import torch

H200_SM_COUNT = 132


def install() -> None:
    """Give ``torch.cpu`` a ``device(index)`` context and CPU tensors an SM count (idempotent)."""
    if not hasattr(torch.cpu, "device"):
        torch.cpu.device = lambda index: contextlib.nullcontext()
    if not getattr(torch.cuda.get_device_properties, "_gdn_parity_cpu", False):
        cuda_properties = torch.cuda.get_device_properties

        def get_device_properties(device=None):
            if isinstance(device, torch.device) and device.type == "cpu":
                return SimpleNamespace(multi_processor_count=H200_SM_COUNT)
            return cuda_properties(device)

        get_device_properties._gdn_parity_cpu = True
        torch.cuda.get_device_properties = get_device_properties
