"""Lay out the base and the patched sglang on a machine without git access to PyPI.

The GPU machine has Python 3.12 and no registry, so the cp311 sglang wheel is
unzipped rather than installed, and the series is applied with ``git apply``.
Kernel modules are imported through a bare ``sglang`` package object: the
package's ``__init__`` pulls in the whole serving stack, which the GPU image
lacks, and none of it is needed to run a kernel.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import types
import zipfile
from pathlib import Path


def lay_out(wheel: Path, patches: list[Path], root: Path) -> dict[str, Path]:
    """``root/base`` is the wheel's sglang; ``root/patched`` is it plus the series."""
    base = root / "base"
    if not base.exists():
        with zipfile.ZipFile(wheel) as zf:
            members = [m for m in zf.namelist() if m.startswith("sglang/")]
            zf.extractall(base / "python", members)
    patched = root / "patched"
    shutil.rmtree(patched, ignore_errors=True)
    shutil.copytree(base, patched)
    for patch in patches:
        subprocess.run(["git", "apply", str(patch.resolve())], cwd=patched, check=True)
    return {"base": base, "patched": patched}


def import_sglang_from(tree: Path) -> None:
    """Make ``import sglang.X`` load from ``tree/python`` without running sglang/__init__."""
    package = types.ModuleType("sglang")
    package.__path__ = [str(tree / "python" / "sglang")]
    sys.modules["sglang"] = package
    sys.path.insert(0, str(tree / "python"))
