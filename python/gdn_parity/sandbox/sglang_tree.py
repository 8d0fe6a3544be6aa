"""Make one variant's sglang tree the importable ``sglang`` of this process, on a device.

On CPU the Triton interpreter is switched on (before triton is first imported)
and given the fixes of ``triton_interpreter_fixes`` and ``torch_cpu_device``. On
CUDA a missing ``sgl_kernel`` is stubbed (``sgl_kernel_stub``).
"""

from __future__ import annotations

import os
from pathlib import Path

from gdn_parity.sandbox.bare_import import import_sglang_from


def use_tree(tree: Path, device: str) -> None:
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
        from gdn_parity.sandbox import (
            torch_cpu_device,
            torchvision_shim,
            triton_interpreter_fixes,
        )

        triton_interpreter_fixes.install()
        torch_cpu_device.install()
        torchvision_shim.install()
    else:
        from gdn_parity.sandbox import sgl_kernel_stub

        sgl_kernel_stub.install()  # where sgl_kernel is missing (see its docstring)
    import_sglang_from(tree)
