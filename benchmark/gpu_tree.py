"""Lay out the base and the patched sglang on a machine without access to PyPI.

The GPU machine has Python 3.12 and no registry, so the cp311 sglang wheel is
unzipped rather than installed, and the series is applied with ``git apply``.
Kernel modules are then imported with ``gdn_parity.sandbox.bare_import``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from gdn_parity.sandbox.bare_import import import_sglang_from  # noqa: E402,F401 (re-exported)


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
