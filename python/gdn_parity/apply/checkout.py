"""Apply the series to an sglang git checkout with ``git am``, all or nothing."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

from gdn_parity.apply.target import (
    Done,
    Holds,
    State,
    Status,
    file_status,
    files_hold,
    require,
)
from gdn_parity.errors import GdnParityError
from gdn_parity.logs import keep_log, last_line
from gdn_parity.queue.changes import FileChange
from gdn_parity.queue.git import git, git_out, is_git_repo
from gdn_parity.queue.series import Series


def _blob_at_head(checkout: Path, path: str) -> bytes | None:
    proc = git(checkout, "cat-file", "blob", f"HEAD:{path}", check=False)
    return proc.stdout if proc.returncode == 0 else None


def _snapshot(checkout: Path) -> tuple[str, str]:
    status = git_out(checkout, "status", "--porcelain", "--untracked-files=all")
    return git_out(checkout, "rev-parse", "HEAD"), status


@dataclass(frozen=True)
class CheckoutTarget:
    """An sglang git checkout: the series lands as one commit per patch (the user's own)."""

    path: Path
    series: Series

    def check(self) -> None:
        """The directory is the top of a git checkout of sglang."""
        if not is_git_repo(self.path):
            raise GdnParityError(f"{self.path} is not the top of a git checkout")
        if not (self.path / "python" / "sglang").is_dir():
            raise GdnParityError(f"{self.path} has no python/sglang/: not an sglang checkout")

    def status(self, changes: list[FileChange]) -> Status:
        """From the files at HEAD; ``modified`` where the work tree changes one of them."""
        self.check()
        touched = [c.path for c in changes]
        edited = git_out(self.path, "diff", "--name-only", "HEAD", "--", *touched).split()
        status = file_status(
            changes,
            lambda c: _blob_at_head(self.path, c.path),
            lambda c: c.path,
            "sglang's base nor the series",
        )
        if edited:
            return replace(
                status,
                state=State.MODIFIED,
                details=[f"{path}: has uncommitted changes" for path in edited],
                note="status and apply read the checkout's HEAD: commit or stash these first",
            )
        if status.state is not State.MODIFIED or not status.holding[Holds.SERIES]:
            return status
        return replace(
            status,
            note=f"{files_hold(status, Holds.SERIES)} the series' bytes at HEAD: is part of "
            "the series committed here (git log)? `git am` the rest, or start again from "
            f"sglang {self.series.version}",
        )

    def apply(self, changes: list[FileChange]) -> Done:
        """``git am`` the series onto the checkout."""
        checkout, series = self.path, self.series
        self.check()
        if git_out(checkout, "status", "--porcelain", "--untracked-files=no"):
            raise GdnParityError(f"{checkout} has uncommitted changes: commit or stash them first")
        require(
            self.status(changes),
            State.UNPATCHED,
            {
                State.PATCHED: f"the series is already applied to {checkout}",
                State.MODIFIED: f"{checkout} is not sglang {series.version} "
                "where the series touches it",
            },
        )
        in_the_way = [c.path for c in changes if c.before is None and (checkout / c.path).exists()]
        if in_the_way:
            raise GdnParityError(f"untracked files are in the way: {in_the_way}")
        # git am commits as the user, and git without an identity refuses (a new machine, CI)
        ident = subprocess.run(
            ["git", "-C", str(checkout), "var", "GIT_COMMITTER_IDENT"], capture_output=True
        )
        if ident.returncode != 0:
            raise GdnParityError(
                f"git has no identity to commit the series with in {checkout}: set one "
                f"(git -C {checkout} config user.name 'Your Name' && git -C {checkout} "
                "config user.email you@example.com) and apply again"
            )
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
            output = (proc.stdout + proc.stderr).decode(errors="replace")
            log = keep_log("git-am", output)
            raise GdnParityError(
                f"git am failed and the checkout was left as it was: {last_line(output)} "
                f"(git am's output: {log})"
            )
        count = len(series.patches)
        return Done(count, f"applied {count} patch(es) to {checkout} as commits")

    def revert(self, changes: list[FileChange]) -> Done:
        raise GdnParityError("in a git checkout, revert with git (e.g. git reset)")
