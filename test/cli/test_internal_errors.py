"""An exception no verb expects (a bug, a broken install) is one line, naming the file that
holds its traceback, with exit status 70: never 1, which is a verdict ("diverged").

The failure is real: gdn-parity runs from a copy of its package that lacks the module
``demo`` imports, as an install that lost a file would.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import gdn_parity

EXIT_INTERNAL = 70
MISSING = "gdn_parity.drift.demo"


def _broken_install(root: Path) -> Path:
    """A copy of the gdn_parity package under ``root`` without ``drift/demo.py``."""
    package = Path(gdn_parity.__file__).parent
    shutil.copytree(package, root / "gdn_parity", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "gdn_parity" / "drift" / "demo.py").unlink()
    return root


def _demo(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    site = _broken_install(tmp_path / "site")
    return subprocess.run(
        [sys.executable, "-m", "gdn_parity.cli", "demo", "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(site), **env},
        timeout=120,
    )


def _the_one_line(proc: subprocess.CompletedProcess) -> tuple[str, Path]:
    """The line, and the traceback's file it names."""
    assert proc.returncode == EXIT_INTERNAL, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith(
        f"gdn-parity demo: internal error: ModuleNotFoundError: No module named '{MISSING}' "
        "(a bug in gdn-parity or a broken install; the traceback: "
    ), line
    (log,) = re.findall(r"the traceback: (/\S+\.log)\)$", line)
    text = Path(log).read_text()
    assert text.startswith("Traceback") and "cmd_demo" in text, text
    return line, Path(log)


def test_an_unexpected_exception_is_one_line_and_exit_70(tmp_path):
    """Before: the traceback on stderr and exit status 1."""
    cache = tmp_path / "cache"
    _, log = _the_one_line(_demo(tmp_path, GDN_PARITY_CACHE=str(cache)))
    assert log.parent == cache / "logs"
    assert not (tmp_path / "out").exists()


def test_the_traceback_goes_to_the_temporary_directory_when_the_cache_is_unusable(tmp_path):
    """The cache may be what failed: here it is a file."""
    (tmp_path / "cache").write_text("not a directory\n")
    (tmp_path / "tmp").mkdir()
    _, log = _the_one_line(
        _demo(tmp_path, GDN_PARITY_CACHE=str(tmp_path / "cache"), TMPDIR=str(tmp_path / "tmp"))
    )
    assert log.parent == tmp_path / "tmp"
