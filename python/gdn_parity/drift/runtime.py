"""Make one variant's sglang tree the importable ``sglang`` of this process, on a device.

On CPU the Triton interpreter is switched on (before triton is first imported)
and given the fixes of ``gdn_parity.interpreter``.
"""

from __future__ import annotations

import os
from pathlib import Path


def use_tree(tree: Path, device: str) -> None:
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
        from gdn_parity import interpreter

        interpreter.install()
    from gdn_parity.bare_import import import_sglang_from

    import_sglang_from(tree)
