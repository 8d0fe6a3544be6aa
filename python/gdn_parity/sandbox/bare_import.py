"""Import modules of a patched sglang tree without running ``sglang/__init__``.

``sglang/__init__`` imports the whole serving stack (transformers, and through it
torchvision, whose PyPI wheel fails to import beside a CPU build of torch; on the
GPU image, IPython, datasets and more are missing). A kernel module needs none of
that, so the ``sglang`` package is registered as a bare package object whose
search path is the tree's ``python/sglang``.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path


def import_sglang_from(tree: Path) -> None:
    """Make ``import sglang.X`` load ``tree/python/sglang/X`` (sglang/__init__ is skipped)."""
    package = types.ModuleType("sglang")
    package.__path__ = [str(tree / "python" / "sglang")]
    sys.modules["sglang"] = package
    sys.path.insert(0, str(tree / "python"))
