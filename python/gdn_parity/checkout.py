"""Apply the series to an sglang git checkout with ``git am``, all or nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gdn_parity.errors import GdnParityError
from gdn_parity.git import git, git_out, is_git_repo
from gdn_parity.plan import FileChange
from gdn_parity.series import Series


def _blob_at_head(checkout: Path, path: str) -> bytes | None:
    proc = git(checkout, "cat-file", "blob", f"HEAD:{path}", check=False)
    return proc.stdout if proc.returncode == 0 else None


def checkout_state(checkout: Path, changes: list[FileChange]) -> tuple[str, list[str]]:
    """``("unpatched"|"patched"|"modified", details)`` from the files at HEAD."""
    current = {c.path: _blob_at_head(checkout, c.path) for c in changes}
    if all(current[c.path] == c.before for c in changes):
        return "unpatched", []
    if all(current[c.path] == c.after for c in changes):
        return "patched", []
    return "modified", [
        f"{c.path}: matches neither sglang's base nor the series"
        for c in changes
        if current[c.path] not in (c.before, c.after)
    ]


def _snapshot(checkout: Path) -> tuple[str, str]:
    status = git_out(checkout, "status", "--porcelain", "--untracked-files=all")
    return git_out(checkout, "rev-parse", "HEAD"), status


def apply_to_checkout(checkout: Path, series: Series, changes: list[FileChange]) -> int:
    """``git am`` the series onto ``checkout``; return the number of commits made."""
    if not is_git_repo(checkout):
        raise GdnParityError(f"{checkout} is not the top of a git checkout")
    if not (checkout / "python" / "sglang").is_dir():
        raise GdnParityError(f"{checkout} has no python/sglang/: not an sglang checkout")
    if git_out(checkout, "status", "--porcelain", "--untracked-files=no"):
        raise GdnParityError(f"{checkout} has uncommitted changes: commit or stash them first")
    state, details = checkout_state(checkout, changes)
    if state == "patched":
        raise GdnParityError(f"the series is already applied to {checkout}")
    if state == "modified":
        raise GdnParityError(
            f"{checkout} is not sglang {series.version} where the series "
            "touches it:\n  " + "\n  ".join(details)
        )
    in_the_way = [c.path for c in changes if c.before is None and (checkout / c.path).exists()]
    if in_the_way:
        raise GdnParityError(f"untracked files are in the way: {in_the_way}")
    before = _snapshot(checkout)
    # The user's own git identity and config: these commits are theirs.
    proc = subprocess.run(
        ["git", "-C", str(checkout), "am", "--no-3way", "--keep-non-patch", "--quiet"]
        + [str(p) for p in series.patch_paths()],
        capture_output=True,
    )
    if proc.returncode != 0:
        subprocess.run(["git", "-C", str(checkout), "am", "--abort"], capture_output=True)
        if _snapshot(checkout) != before:
            git(checkout, "reset", "--hard", "--quiet", before[0])
        raise GdnParityError(
            "git am failed and the checkout was left as it was:\n"
            + (proc.stdout + proc.stderr).decode(errors="replace").strip()
        )
    return len(series.patches)
