"""``gdn-parity export`` and ``gdn-parity check``: patches/ from a tree, and the round trip."""

from __future__ import annotations

import filecmp
import tempfile
from pathlib import Path

from gdn_parity.errors import GdnParityError
from gdn_parity.queue.base import BASE_BRANCH
from gdn_parity.queue.git import git, is_clean, is_git_repo
from gdn_parity.queue.series import SERIES_FILE, Series
from gdn_parity.queue.tree import materialise_tree

# Every option that could vary with a user's config or a repo's size is fixed.
FORMAT_PATCH_ARGS = (
    "format-patch",
    "--zero-commit",
    "--full-index",
    "--no-signature",
    "--no-renames",
    "--diff-algorithm=myers",
    "--stat=80",
    "--stat-graph-width=20",
    "--numbered",
    "--subject-prefix=PATCH",
    "--no-attach",
    "--no-thread",
    "--no-binary",
)


def export_series(series: Series, tree: Path, out_dir: Path) -> list[str]:
    """Write one patch per commit in ``base..HEAD`` of ``tree`` and a new series file."""
    if not is_git_repo(tree):
        raise GdnParityError(f"{tree} is not a git tree: make one with `gdn-parity tree DIR`")
    if not is_clean(tree):
        raise GdnParityError(f"{tree} has uncommitted changes: commit them first")
    _check_base(series, tree)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        git(tree, *FORMAT_PATCH_ARGS, "--output-directory", tmp, f"{BASE_BRANCH}..HEAD")
        names = sorted(p.name for p in Path(tmp).glob("*.patch"))
        for old in out_dir.glob("*.patch"):
            if old.name not in names:
                old.unlink()
        for name in names:
            (out_dir / name).write_bytes((Path(tmp) / name).read_bytes())
    (out_dir / SERIES_FILE).write_text(series.with_patches(names).render())
    return names


def _check_base(series: Series, tree: Path) -> None:
    """HEAD descends from the pinned base commit, and branch ``base`` is at it.

    The patches are the commits ``base..HEAD``: a ``base`` branch moved (a commit on
    it, a rebase) would export the wrong commits.
    """
    pinned = series.base_commit
    if git(tree, "merge-base", "--is-ancestor", pinned, "HEAD", check=False).returncode != 0:
        raise GdnParityError(
            f"{tree}'s HEAD does not descend from the pinned base commit {pinned[:12]} "
            f"(sglang {series.version}): the series must be commits on top of it"
        )
    found = git(tree, "rev-parse", "--verify", "--quiet", f"refs/heads/{BASE_BRANCH}", check=False)
    base = found.stdout.decode().strip()
    if base == pinned:
        return
    where = f"is at {base[:12]}" if base else "is missing"
    fix = f"put it back with `git -C {tree} branch -f {BASE_BRANCH} {pinned[:12]}`"
    head = git(tree, "symbolic-ref", "--quiet", "HEAD", check=False).stdout.decode().strip()
    if head == f"refs/heads/{BASE_BRANCH}":
        fix = f"switch to a branch of your own (`git -C {tree} switch -c NAME`), then {fix}"
    raise GdnParityError(
        f"{tree}'s branch '{BASE_BRANCH}' {where}: export writes the commits "
        f"{BASE_BRANCH}..HEAD, so it must be the pinned base commit {pinned[:12]} "
        f"(sglang {series.version}); {fix}"
    )


def check_series(series: Series) -> list[str]:
    """Differences between patches/ and export(tree(patches)); empty means round-trip."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = materialise_tree(series, Path(tmp) / "tree")
        out = Path(tmp) / "patches"
        export_series(series, tree, out)
        ours = {p.name for p in series.directory.iterdir() if p.name.endswith(".patch")}
        ours.add(SERIES_FILE)
        theirs = {p.name for p in out.iterdir()}
        problems = [f"only in patches/: {n}" for n in sorted(ours - theirs)]
        problems += [f"only in the export: {n}" for n in sorted(theirs - ours)]
        for name in sorted(ours & theirs):
            if not filecmp.cmp(series.directory / name, out / name, shallow=False):
                problems.append(f"differs from its re-export: {name}")
        return problems
