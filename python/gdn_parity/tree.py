"""``gdn-parity tree``: a git work tree holding the base plus one commit per patch."""

from __future__ import annotations

import shutil
from pathlib import Path

from gdn_parity.base import BASE_BRANCH, base_repo, cache_dir
from gdn_parity.errors import GdnParityError
from gdn_parity.git import FIXED_DATE, git, git_out, is_clean, is_git_repo
from gdn_parity.series import Series

TREE_BRANCH = "gdn-parity"
DIGEST_KEY = "gdnparity.series-digest"
HEAD_KEY = "gdnparity.series-head"


def default_tree_dir() -> Path:
    return cache_dir() / "tree"


def _recorded(repo: Path, key: str) -> str:
    return git(repo, "config", "--get", key, check=False).stdout.decode().strip()


def _apply_series(repo: Path, series: Series) -> None:
    """``git am`` every patch on top of the base; name patch, file and hunk on failure."""
    committer = {"GIT_COMMITTER_DATE": FIXED_DATE}
    for path in series.patch_paths():
        proc = git(
            repo,
            "am",
            "--quiet",
            "--committer-date-is-author-date",
            "--keep-cr",
            "--keep-non-patch",
            str(path),
            check=False,
            env=committer,
        )
        if proc.returncode != 0:
            detail = (proc.stdout + proc.stderr).decode(errors="replace").strip()
            git(repo, "am", "--abort", check=False)
            raise GdnParityError(
                f"patch {path.name} does not apply to the tree at {repo}:\n{detail}"
            )


def materialise_tree(series: Series, directory: Path | None = None) -> Path:
    """Make ``directory`` hold base + series; do nothing when it already does."""
    directory = (directory or default_tree_dir()).resolve()
    digest = series.digest()
    if is_git_repo(directory):
        head = git_out(directory, "rev-parse", "HEAD")
        if (
            _recorded(directory, DIGEST_KEY) == digest
            and _recorded(directory, HEAD_KEY) == head
            and is_clean(directory)
        ):
            return directory
        if _recorded(directory, DIGEST_KEY) == "":
            raise GdnParityError(
                f"{directory} is a git repo that gdn-parity did not make; "
                "choose another directory"
            )
        if not is_clean(directory) or _recorded(directory, HEAD_KEY) != head:
            raise GdnParityError(
                f"{directory} has commits or changes that are not in patches/: "
                "run `gdn-parity export --tree DIR` to keep them, or remove "
                "the directory to start again"
            )
        git(directory, "checkout", "--quiet", "--force", "-B", TREE_BRANCH, BASE_BRANCH)
    else:
        if directory.exists() and any(directory.iterdir()):
            raise GdnParityError(f"{directory} exists and is not a gdn-parity tree")
        source = base_repo(series)
        directory.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(directory, ignore_errors=True)
        git(directory.parent, "clone", "--quiet", "--branch", BASE_BRANCH, str(source), str(directory))
        git(directory, "checkout", "--quiet", "-B", TREE_BRANCH)
        git(directory, "config", DIGEST_KEY, "")
    if git_out(directory, "rev-parse", BASE_BRANCH) != series.base_commit:
        git(directory, "branch", "--force", BASE_BRANCH, series.base_commit)
    _apply_series(directory, series)
    record_tree(directory, series)
    return directory


def record_tree(directory: Path, series: Series) -> None:
    """Mark ``directory``'s HEAD as exactly ``series`` (after materialising or exporting)."""
    git(directory, "config", DIGEST_KEY, series.digest())
    git(directory, "config", HEAD_KEY, git_out(directory, "rev-parse", "HEAD"))
