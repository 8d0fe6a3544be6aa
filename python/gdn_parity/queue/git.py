"""Run git with an environment that makes every result reproducible."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gdn_parity.errors import GdnParityError

# Fixed identity and dates: the base commit and the commits `git am` makes
# from the series hash the same on every machine.
FIXED_IDENTITY = {
    "GIT_AUTHOR_NAME": "gdn-parity",
    "GIT_AUTHOR_EMAIL": "gdn-parity@localhost",
    "GIT_COMMITTER_NAME": "gdn-parity",
    "GIT_COMMITTER_EMAIL": "gdn-parity@localhost",
}
FIXED_DATE = "2026-10-30T00:00:00+00:00"


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for git: no user or system config, no pager, fixed identity."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        {
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_PAGER": "cat",
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
            "TZ": "UTC",
        }
    )
    env.update(FIXED_IDENTITY)
    if extra:
        env.update(extra)
    return env


def git(
    repo: Path,
    *args: str,
    check: bool = True,
    env: dict[str, str] | None = None,
    input_bytes: bytes | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``git -C repo args``; raise GdnParityError with git's message on failure."""
    proc = subprocess.run(
        ["git", "-C", str(repo), *args],
        env=git_env(env),
        input=input_bytes,
        capture_output=True,
    )
    if check and proc.returncode != 0:
        said = proc.stderr.decode(errors="replace").splitlines()
        message = "; ".join(s.strip() for s in said if s.strip() and not s.startswith("hint:"))
        raise GdnParityError(f"git {' '.join(args)} failed in {repo}: {message}")
    return proc


def git_out(repo: Path, *args: str) -> str:
    """Run git and return its stripped standard output."""
    return git(repo, *args).stdout.decode().strip()


def is_git_repo(path: Path) -> bool:
    """True when ``path`` is the top level of a git work tree."""
    if not path.is_dir():
        return False
    proc = git(path, "rev-parse", "--show-toplevel", check=False)
    if proc.returncode != 0:
        return False
    return Path(proc.stdout.decode().strip()).resolve() == path.resolve()


def is_clean(repo: Path) -> bool:
    """True when the work tree and the index match HEAD (untracked files count)."""
    return git_out(repo, "status", "--porcelain", "--untracked-files=all") == ""
