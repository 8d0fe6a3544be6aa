"""``gdn-parity tree``: a git work tree holding the base plus one commit per patch."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from gdn_parity.errors import GdnParityError
from gdn_parity.logs import keep_log, last_line
from gdn_parity.notes import note
from gdn_parity.paths import first_missing
from gdn_parity.queue.base import BASE_BRANCH, base_repo
from gdn_parity.queue.cache import cache_dir, cache_lock
from gdn_parity.queue.git import FIXED_DATE, git, git_out, is_clean, is_git_repo
from gdn_parity.queue.series import Series

TREE_BRANCH = "gdn-parity"
DIGEST_KEY = "gdnparity.series-digest"
HEAD_KEY = "gdnparity.series-head"


def default_tree_dir() -> Path:
    """``$GDN_PARITY_TREE``, else the cache's ``tree/``."""
    env = os.environ.get("GDN_PARITY_TREE")
    return Path(env) if env else cache_dir() / "tree"


def _recorded(repo: Path, key: str) -> str:
    return git(repo, "config", "--get", key, check=False).stdout.decode().strip()


def made_by_gdn_parity(directory: Path) -> bool:
    """True when ``directory`` is a git repo that materialising a tree made and recorded."""
    return is_git_repo(directory) and _recorded(directory, DIGEST_KEY) != ""


def holds_nothing(directory: Path) -> bool:
    """True where a new tree can be made: ``directory`` is missing or an empty directory."""
    return not directory.exists() or (directory.is_dir() and not any(directory.iterdir()))


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
            output = (proc.stdout + proc.stderr).decode(errors="replace")
            git(repo, "am", "--abort", check=False)
            failures = "; ".join(_failed_hunks(path, output)) or last_line(output)
            log = keep_log("git-am", output)
            raise GdnParityError(
                f"patch {path.name} does not apply: {failures} (git am's output: {log})"
            )


def _failed_hunks(patch: Path, am_output: str) -> list[str]:
    """``FILE: @@ -L,... @@`` for each ``patch failed: FILE:L`` git reported."""
    text = patch.read_text(errors="replace").splitlines()
    lines = []
    for match in re.finditer(r"patch failed: (\S+):(\d+)", am_output):
        name, start = match.group(1), match.group(2)
        in_file = False
        hunk = f"the hunk at line {start}"
        for line in text:
            if line.startswith("diff --git "):
                in_file = line.endswith(f" b/{name}")
            elif in_file and line.startswith(f"@@ -{start},"):
                hunk = line[: line.index(" @@") + 3]  # without the function it is in
                break
        lines.append(f"{name}: {hunk}")
    return lines


def _make_directory(directory: Path) -> Path | None:
    """Make ``directory`` (and its parents); the outermost one made, to remove on failure."""
    made = first_missing(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GdnParityError(f"cannot make the tree {directory}: {exc.strerror or exc}") from exc
    return made


def materialise_tree(series: Series, directory: Path | None = None) -> Path:
    """Make ``directory`` hold base + series; do nothing when it already does. One process
    at a time (the cache's lock): the base and the cache's trees are shared."""
    directory = (directory or default_tree_dir()).resolve()
    if directory.exists() and not directory.is_dir():
        raise GdnParityError(f"{directory} is a file, not a directory for the tree")
    with cache_lock():
        return _materialise(series, directory)


def _materialise(series: Series, directory: Path) -> Path:
    digest = series.digest()
    if is_git_repo(directory):
        # First: another repository may have no commit, and so no HEAD to read.
        if not made_by_gdn_parity(directory):
            raise GdnParityError(
                f"{directory} is a git repository that gdn-parity did not make (it is left "
                "alone): name a new or empty directory for the tree"
            )
        head = git_out(directory, "rev-parse", "HEAD")
        if (
            _recorded(directory, DIGEST_KEY) == digest
            and _recorded(directory, HEAD_KEY) == head
            and is_clean(directory)
        ):
            return directory
        if not is_clean(directory) or _recorded(directory, HEAD_KEY) != head:
            raise GdnParityError(
                f"{directory} has commits or changes that are not in patches/: "
                "run `gdn-parity export --tree DIR` to keep them, or remove "
                "the directory to start again"
            )
        base_repo(series)  # the series' pins hold, as for a new tree (else it refuses)
        git(directory, "checkout", "--quiet", "--force", "-B", TREE_BRANCH, BASE_BRANCH)
    else:
        if not holds_nothing(directory):
            raise GdnParityError(f"{directory} exists and is not a gdn-parity tree")
        made = _make_directory(directory)
        try:
            source = base_repo(series)
            git(directory, "clone", "--quiet", "--branch", BASE_BRANCH, str(source), ".")
        except BaseException:
            if made is not None:
                shutil.rmtree(made, ignore_errors=True)
            raise
        git(directory, "checkout", "--quiet", "-B", TREE_BRANCH)
        git(directory, "config", DIGEST_KEY, "")
    note(f"applying {_patches_named(series.patches)} in {directory}")
    try:
        _apply_series(directory, series)
    except GdnParityError:
        # Nothing unexported can be lost: a reused tree was clean and exported.
        shutil.rmtree(directory)
        raise
    record_tree(directory, series)
    return directory


def _patches_named(patches: tuple[str, ...]) -> str:
    """What a note calls the patches it applies: a prefix of the series says which."""
    if len(patches) == 1:
        return f"patch {patches[0]}"
    if not patches:
        return "no patch"
    first, last = (name.split("-", 1)[0] for name in (patches[0], patches[-1]))
    return f"{len(patches)} patches ({first} to {last})"


def record_tree(directory: Path, series: Series) -> None:
    """Mark ``directory``'s HEAD as exactly ``series`` (after materialising or exporting)."""
    git(directory, "config", DIGEST_KEY, series.digest())
    git(directory, "config", HEAD_KEY, git_out(directory, "rev-parse", "HEAD"))
