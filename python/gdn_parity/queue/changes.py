"""What the series does to each file: base bytes and patched bytes, from the tree."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from gdn_parity.queue.base import BASE_BRANCH
from gdn_parity.queue.git import git, git_out

PACKAGE_ROOT = "python/sglang/"


@dataclass(frozen=True)
class FileChange:
    """One file the series touches; ``None`` bytes mean the file is absent."""

    path: str  # upstream path, e.g. python/sglang/srt/environ.py
    before: bytes | None
    after: bytes | None

    @property
    def package_path(self) -> str:
        """The path inside the installed ``sglang`` package."""
        return self.path[len(PACKAGE_ROOT) :]

    @property
    def in_package(self) -> bool:
        return self.path.startswith(PACKAGE_ROOT)


def sha256_bytes(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def _blob(tree: Path, rev: str, path: str) -> bytes | None:
    proc = git(tree, "cat-file", "blob", f"{rev}:{path}", check=False)
    return proc.stdout if proc.returncode == 0 else None


def series_changes(tree: Path) -> list[FileChange]:
    """Every file that differs between the base and HEAD of a materialised tree."""
    names = git_out(tree, "diff", "--no-renames", "--name-only", BASE_BRANCH, "HEAD")
    return [
        FileChange(name, _blob(tree, BASE_BRANCH, name), _blob(tree, "HEAD", name))
        for name in names.splitlines()
        if name
    ]
