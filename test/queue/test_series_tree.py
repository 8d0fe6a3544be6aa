"""The patch queue: tree, export and check, for real, on the pinned base."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gdn_parity.errors import GdnParityError
from gdn_parity.queue.base import BASE_BRANCH, base_repo, base_repo_from_tree
from gdn_parity.queue.cache import cache_dir
from gdn_parity.queue.export import check_series, export_series
from gdn_parity.queue.git import git_out
from gdn_parity.queue.series import load_series
from gdn_parity.queue.tree import materialise_tree
from helpers.cli import assert_refused

pytestmark = pytest.mark.needs_tree


def _copy_patches(series, dest: Path) -> Path:
    shutil.copytree(series.directory, dest)
    return dest


def test_base_commit_is_the_pinned_reproducible_hash(series):
    repo = base_repo(series)
    assert git_out(repo, "rev-parse", BASE_BRANCH) == series.base_commit
    assert (repo / "python" / "sglang" / "srt" / "environ.py").is_file()


def _files_of(tree: Path, dest: Path) -> Path:
    """The tree's files without .git: what benchmark/gpu/pack_tree.sh packs."""
    return Path(shutil.copytree(tree, dest, ignore=shutil.ignore_patterns(".git")))


def test_the_base_laid_out_from_a_series_tree_is_the_pinned_commit_without_the_wheel(
    series, series_tree, tmp_path, monkeypatch
):
    """A GPU call carries the series' tree, not the 38 MB wheel: the base comes from the
    tree's files with the patches taken back, and is the commit patches/series pins."""
    files = _files_of(series_tree, tmp_path / "files")
    monkeypatch.setenv("GDN_PARITY_CACHE", str(tmp_path / "cache"))
    repo = base_repo_from_tree(series, files)
    assert git_out(repo, "rev-parse", BASE_BRANCH) == series.base_commit
    assert not (tmp_path / "cache" / "wheels").exists()
    tree = materialise_tree(series, tmp_path / "tree")  # from that base, offline
    assert git_out(tree, "rev-parse", "HEAD") == git_out(series_tree, "rev-parse", "HEAD")


@pytest.mark.parametrize(
    ("path", "edit", "says"),
    [
        ("python/sglang/version.py", "# a local edit\n", "but the series pins"),
        ("python/sglang/srt/environ.py", "", "does not come off it"),
    ],
    ids=["a file no patch touches", "a file a patch changes"],
)
def test_a_tree_of_other_files_gives_no_base(
    series, series_tree, tmp_path, monkeypatch, path, edit, says
):
    files = _files_of(series_tree, tmp_path / "files")
    target = files / path
    target.write_text(edit + target.read_text() if edit else "")
    monkeypatch.setenv("GDN_PARITY_CACHE", str(tmp_path / "cache"))
    with pytest.raises(GdnParityError, match=says):
        base_repo_from_tree(series, files)
    assert [p.name for p in (tmp_path / "cache").iterdir() if p.name != ".lock"] == []


def test_git_am_of_the_series_gives_one_commit_per_patch(series, tmp_path):
    tree = materialise_tree(series, tmp_path / "tree")
    log = git_out(tree, "log", "--format=%s", f"{series.base_commit}..HEAD")
    subjects = log.splitlines()[::-1]
    assert len(subjects) == len(series.patches)
    width = len(str(len(subjects)))  # git format-patch pads: [PATCH 01/10]
    for number, (subject, patch) in enumerate(zip(subjects, series.patch_paths(), strict=True)):
        text = patch.read_text()
        tag = f"[PATCH {number + 1:0{width}d}/{len(subjects)}]"
        assert f"Subject: {tag} {subject}" in text.replace("\n ", " ")


def test_a_prefix_of_the_series_says_which_patches_it_applies(series, tmp_path, capsys):
    """The demo's 0.5.23 variant is the base plus the state trace alone: its note names the
    patch, not a bare count a newcomer reads as the series."""
    materialise_tree(series.prefix(1), tmp_path / "one")
    assert f"applying patch {series.patches[0]} in {tmp_path / 'one'}" in capsys.readouterr().err
    materialise_tree(series.prefix(3), tmp_path / "three")
    assert f"applying 3 patches (0001 to 0003) in {tmp_path / 'three'}" in capsys.readouterr().err


def test_tree_is_idempotent(series, tmp_path):
    tree = materialise_tree(series, tmp_path / "tree")
    head = git_out(tree, "rev-parse", "HEAD")
    assert materialise_tree(series, tree) == tree
    assert git_out(tree, "rev-parse", "HEAD") == head


def test_tree_refuses_a_tree_with_unexported_work(series, tmp_path):
    tree = materialise_tree(series, tmp_path / "tree")
    (tree / "python" / "sglang" / "srt" / "environ.py").write_text("# local edit\n")
    with pytest.raises(GdnParityError, match="not in patches/"):
        materialise_tree(series, tree)
    assert (tree / "python" / "sglang" / "srt" / "environ.py").read_text() == "# local edit\n"


def test_check_round_trips_byte_for_byte(series):
    assert check_series(series) == []


def test_check_detects_a_hand_edited_patch(series, tmp_path):
    patches = _copy_patches(series, tmp_path / "patches")
    first = patches / series.patches[0]
    first.write_text(first.read_text().replace("\nSubject:", "\nX-Note: hand edit\nSubject:", 1))
    assert check_series(load_series(patches)) == [f"differs from its re-export: {first.name}"]


def test_export_writes_a_new_commit_as_a_new_patch(series, tmp_path):
    patches = _copy_patches(series, tmp_path / "patches")
    tree = materialise_tree(load_series(patches), tmp_path / "tree")
    (tree / "docs").mkdir(exist_ok=True)
    (tree / "docs" / "note.md").write_text("a note\n")
    subprocess.run(["git", "-C", str(tree), "add", "docs/note.md"], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(tree),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "[Docs] A note",
        ],
        check=True,
    )
    names = export_series(load_series(patches), tree, patches)
    assert len(names) == len(series.patches) + 1
    assert names[-1].endswith("-Docs-A-note.patch")
    assert load_series(patches).patches[-1] == names[-1]
    assert check_series(load_series(patches)) == []


@pytest.mark.parametrize("moved", ["forward", "deleted", "forward-and-checked-out"])
def test_cli_export_names_a_moved_base_branch(moved, series, tmp_path, run_cli):
    """Before: "HEAD does not descend from the pinned base commit", which it did."""
    patches = _copy_patches(series, tmp_path / "patches")
    tree = materialise_tree(load_series(patches), tmp_path / "tree")
    before = {p.name: p.read_bytes() for p in patches.iterdir()}
    moved_to = git_out(tree, "rev-parse", "HEAD~2")
    if moved == "deleted":
        git_out(tree, "branch", "-D", BASE_BRANCH)
    elif moved == "forward":
        git_out(tree, "branch", "-f", BASE_BRANCH, moved_to)
    else:
        git_out(tree, "checkout", "--quiet", "-B", BASE_BRANCH, moved_to)
    proc = run_cli("--patches", str(patches), "export", "--tree", str(tree))
    where = "is missing" if moved == "deleted" else f"is at {moved_to[:12]}"
    assert_refused(
        proc,
        f"{tree}'s branch 'base' {where}: export writes the commits base..HEAD, so it must be "
        f"the pinned base commit {series.base_commit[:12]} (sglang {series.version}); ",
    )
    fix = f"put it back with `git -C {tree} branch -f base {series.base_commit[:12]}`"
    if moved == "forward-and-checked-out":
        fix = f"switch to a branch of your own (`git -C {tree} switch -c NAME`), then {fix}"
    assert proc.stderr.rstrip().endswith(fix)
    assert {p.name: p.read_bytes() for p in patches.iterdir()} == before


def test_a_patch_that_does_not_apply_names_patch_file_and_hunk(series, tmp_path, scratch_cache):
    patches = _copy_patches(series, tmp_path / "patches")
    needle = "-    beta_val = tl.sigmoid(b_val).to(b.dtype.element_ty).to(tl.float32)\n"
    gate = next(patches / name for name in series.patches if needle in (patches / name).read_text())
    gate.write_text(gate.read_text().replace(needle, needle.replace("b_val", "b_value"), 1))
    with pytest.raises(GdnParityError) as err:
        materialise_tree(load_series(patches), tmp_path / "tree")
    message = str(err.value)
    assert gate.name in message
    assert "fla/fused_recurrent.py: @@ -" in message
    assert f"(git am's output: {scratch_cache / 'logs'}/" in message
    assert not (tmp_path / "tree").exists()


def test_cli_check_exits_zero_and_says_ok(run_cli):
    proc = run_cli("check")
    assert proc.returncode == 0, proc.stderr
    assert "check ok" in proc.stdout


def test_cli_smoke_imports_the_patched_modules_from_the_tree(sglang_tree, run_cli):
    proc = run_cli("smoke")
    assert proc.returncode == 0, proc.stderr
    paths = [line.split("<- ")[1] for line in proc.stdout.splitlines() if "<- " in line]
    assert len(paths) == 6
    assert all(path.startswith(str(sglang_tree / "python" / "sglang")) for path in paths)


@pytest.mark.slow
def test_processes_that_build_in_one_fresh_cache_at_once_all_get_the_tree(series, tmp_path):
    """Three demos started together on a fresh cache each lay out the base and materialise
    the same variant tree; before the cache's lock one of them failed ("Directory not
    empty" when moving its base into place, or a clone into a tree another was writing)."""
    cache = tmp_path / "cache"
    (cache / "wheels").mkdir(parents=True)
    wheel = cache_dir() / "wheels" / series.wheel_name
    base_repo(series)  # the session's cache holds the checked wheel from here on
    shutil.copy(wheel, cache / "wheels" / series.wheel_name)
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from gdn_parity.queue.series import load_series\n"
        "from gdn_parity.queue.tree import materialise_tree\n"
        "print(materialise_tree(load_series(Path(sys.argv[1])), Path(sys.argv[2])))\n"
    )
    env = {**os.environ, "GDN_PARITY_CACHE": str(cache)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(series.directory), str(cache / "variant-x")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    results = [(proc.wait(timeout=600), *proc.communicate()) for proc in procs]
    assert [rc for rc, _, _ in results] == [0, 0, 0], [err for _, _, err in results]
    tree = cache / "variant-x"
    assert {out.strip() for _, out, _ in results} == {str(tree.resolve())}
    log = git_out(tree, "log", "--format=%s", f"{series.base_commit}..HEAD").splitlines()
    assert len(log) == len(series.patches)


def test_a_relative_cache_path_is_the_cache_from_every_directory(series, tmp_path, run_cli):
    """``GDN_PARITY_CACHE=relative-cache``: git clones the base from inside the new tree,
    where the relative path named nothing ("repository ... does not exist") before the
    cache's path was made absolute."""
    base_repo(series)  # laid out once in the session's cache
    cache = os.path.relpath(cache_dir(), tmp_path)
    env = {**os.environ, "GDN_PARITY_CACHE": cache}
    proc = run_cli("--patches", str(series.directory), "tree", "t", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    log = git_out(tmp_path / "t", "log", "--format=%s", f"{series.base_commit}..HEAD")
    assert len(log.splitlines()) == len(series.patches)


def test_a_cache_path_that_is_a_file_is_refused_naming_the_variable(series, tmp_path, run_cli):
    (tmp_path / "cache").write_text("not a directory")
    env = {**os.environ, "GDN_PARITY_CACHE": str(tmp_path / "cache")}
    proc = run_cli("--patches", str(series.directory), "smoke", env=env, cwd=tmp_path)
    assert_refused(proc, "(GDN_PARITY_CACHE) is not a directory")
