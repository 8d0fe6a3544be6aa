"""`gdn-parity apply` on a real installed sglang 0.5.23 and on a real git checkout.

Every bad input must leave the target's bytes exactly as they were.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gdn_parity.apply.checkout import CheckoutTarget
from gdn_parity.apply.package import MANIFEST, PackageTarget
from gdn_parity.apply.target import State
from gdn_parity.errors import GdnParityError
from gdn_parity.queue.base import base_repo, fetch_wheel
from gdn_parity.queue.changes import series_changes
from gdn_parity.queue.git import git_out
from helpers.cli import assert_refused


def snapshot(root: Path) -> dict[str, tuple[str, int]]:
    """sha256 and mode of every file under ``root`` (caches excluded)."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            out[str(path.relative_to(root))] = (
                hashlib.sha256(path.read_bytes()).hexdigest(),
                stat.S_IMODE(path.stat().st_mode),
            )
    return out


@pytest.fixture(scope="session")
def changes(series_tree):
    return series_changes(series_tree)


@pytest.fixture(scope="session")
def installed_site(series, tmp_path_factory) -> Path:
    """sglang 0.5.23 installed by pip from the pinned wheel (no dependencies)."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-compile",
            "--no-index",
            "--target",
            str(target),
            str(fetch_wheel(series)),
        ],
        check=True,
    )
    return target


@pytest.fixture
def package(installed_site, tmp_path) -> Path:
    site = tmp_path / "site"
    shutil.copytree(installed_site, site, symlinks=True)
    return site / "sglang"


def test_apply_then_revert_is_byte_identical(package, changes, series):
    before = snapshot(package)
    count = PackageTarget(package, series).apply(changes).count
    assert count == len([c for c in changes if c.in_package]) > 0
    assert PackageTarget(package, series).status(changes).state is State.PATCHED
    for change in changes:
        if change.in_package:
            assert (package / change.package_path).read_bytes() == change.after
    assert PackageTarget(package, series).revert(changes).count == count
    assert snapshot(package) == before
    assert PackageTarget(package, series).status(changes).state is State.UNPATCHED


def test_a_replaced_file_keeps_its_permission_bits(package, changes, series):
    """The wheel installs some modules executable (modelopt_quant.py is 0755). Before, apply
    replaced a file with a new one of the umask's mode (0644) and revert left it so."""
    touched = [
        package / c.package_path
        for c in changes
        if c.in_package and (package / c.package_path).is_file()
    ]
    for path in touched:
        path.chmod(0o750)
    PackageTarget(package, series).apply(changes)
    assert {stat.S_IMODE(path.stat().st_mode) for path in touched} == {0o750}
    PackageTarget(package, series).revert(changes)
    assert {stat.S_IMODE(path.stat().st_mode) for path in touched} == {0o750}


def test_double_apply_is_refused_and_changes_nothing(package, changes, series):
    PackageTarget(package, series).apply(changes)
    after_first = snapshot(package)
    with pytest.raises(GdnParityError, match="already applied"):
        PackageTarget(package, series).apply(changes)
    assert snapshot(package) == after_first


def test_wrong_version_is_refused_and_changes_nothing(package, changes, series):
    version_file = package / "_version.py"
    version_file.write_text(version_file.read_text().replace("'0.5.23'", "'0.5.24'"))
    before = snapshot(package)
    with pytest.raises(GdnParityError, match="is sglang 0.5.24"):
        PackageTarget(package, series).apply(changes)
    assert snapshot(package) == before


def test_locally_modified_file_is_refused_and_changes_nothing(package, changes, series):
    touched = next(c for c in changes if c.in_package and c.before is not None)
    path = package / touched.package_path
    path.write_bytes(path.read_bytes() + b"# local fix\n")
    before = snapshot(package)
    with pytest.raises(GdnParityError, match=touched.package_path):
        PackageTarget(package, series).apply(changes)
    assert snapshot(package) == before


def test_read_only_file_is_refused_and_changes_nothing(package, changes, series):
    touched = next(c for c in changes if c.in_package and c.before is not None)
    path = package / touched.package_path
    path.chmod(0o444)
    before = snapshot(package)
    with pytest.raises(GdnParityError, match="read-only"):
        PackageTarget(package, series).apply(changes)
    assert snapshot(package) == before


@pytest.mark.parametrize("verb", ["apply", "revert"])
def test_a_write_that_fails_midway_leaves_the_package_as_it_was(verb, package, changes, series):
    """The last touched file immutable (``chattr +i``), so that the files before it are
    replaced first: they are put back, and no temporary file is left. Before, a refused
    apply left ``<file>.gdn-parity-tmp`` in the package, and its error was the put-back's."""
    target = PackageTarget(package, series)
    if verb == "revert":
        target.apply(changes)
    last = next(package / c.package_path for c in reversed(changes) if c.in_package)
    before = snapshot(package)
    paths = sorted(package.rglob("*"))
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(last)], capture_output=True).returncode:
        pytest.skip("chattr +i needs chattr, root and a file system that takes it")
    try:
        with pytest.raises(GdnParityError) as refused:
            getattr(target, verb)(changes)
    finally:
        subprocess.run([chattr, "-i", str(last)], check=True)
    assert (
        str(refused.value) == f"nothing was changed: writing {last} failed: Operation not permitted"
    )
    assert sorted(package.rglob("*")) == paths
    assert snapshot(package) == before


def test_a_folder_where_a_temporary_file_would_go_is_left_alone(package, changes, series):
    """Each temporary file has a name of its own. Before, a folder named
    ``<file>.gdn-parity-tmp`` (or another run's file there) was written into."""
    first = next(package / c.package_path for c in changes if c.in_package)
    folder = first.with_name(first.name + ".gdn-parity-tmp")
    folder.mkdir()
    PackageTarget(package, series).apply(changes)
    assert PackageTarget(package, series).status(changes).state is State.PATCHED
    assert folder.is_dir() and list(folder.iterdir()) == []


def test_revert_of_a_file_edited_after_apply_is_refused(package, changes, series):
    PackageTarget(package, series).apply(changes)
    touched = next(c for c in changes if c.in_package and c.after is not None)
    path = package / touched.package_path
    path.write_bytes(path.read_bytes() + b"# edited after apply\n")
    before = snapshot(package)
    with pytest.raises(GdnParityError, match=f"{touched.package_path}: matches neither"):
        PackageTarget(package, series).revert(changes)
    assert snapshot(package) == before


def test_cli_site_packages_apply_status_revert(installed_site, tmp_path, run_cli):
    site = tmp_path / "site"
    shutil.copytree(installed_site, site, symlinks=True)
    before = snapshot(site)
    env = dict(os.environ, PYTHONPATH=str(site))

    def cli(*args):
        return run_cli(*args, env=env)

    assert "unpatched" in cli("status", "--site-packages").stdout
    applied = cli("apply", "--site-packages")
    assert applied.returncode == 0, applied.stderr
    assert (site / "sglang" / MANIFEST).is_file()
    assert ": patched" in cli("status", "--site-packages").stdout
    again = cli("apply", "--site-packages")
    assert again.returncode == 2 and "already applied" in again.stderr
    assert cli("apply", "--site-packages", "--revert").returncode == 0
    assert snapshot(site) == before


def test_cli_reads_a_bare_version_assignment(installed_site, tmp_path, run_cli):
    """An install whose ``_version.py`` is only ``__version__ = "0.5.23"`` (not the
    setuptools-scm file the wheel ships). Before: "cannot read the sglang version"."""
    site = tmp_path / "site"
    shutil.copytree(installed_site, site, symlinks=True)
    package = site / "sglang"
    (package / "_version.py").write_text('__version__ = "0.5.23"\n')
    before = snapshot(site)
    assert run_cli("status", str(package)).stdout == f"{package}: unpatched\n"
    applied = run_cli("apply", str(package))
    assert applied.returncode == 0, applied.stderr
    assert run_cli("status", str(package)).stdout == f"{package}: patched\n"
    reverted = run_cli("apply", "--revert", str(package))
    assert reverted.returncode == 0, reverted.stderr
    assert snapshot(site) == before


def test_cli_refusal_names_just_the_one_modified_file(installed_site, changes, tmp_path, run_cli):
    site = tmp_path / "site"
    shutil.copytree(installed_site, site, symlinks=True)
    touched = next(c for c in changes if c.in_package and c.before is not None)
    path = site / "sglang" / touched.package_path
    path.write_bytes(path.read_bytes() + b"# local fix\n")
    before = snapshot(site)
    total = len([c for c in changes if c.in_package])
    note = (
        f"1 of the {total} files the series touches holds neither sglang 0.5.23's bytes nor "
        "the series' (edited, or from another version); gdn-parity changes nothing until they "
        "do (reinstalling sglang 0.5.23 puts its files back)"
    )
    proc = run_cli("apply", str(site / "sglang"))
    assert_refused(proc, f"is modified: {note}")
    assert proc.stderr == (
        f"gdn-parity apply: error: nothing was changed: {site / 'sglang'} is modified: {note}: "
        f"{touched.package_path}: matches neither the base nor the series\n"
    )
    status = run_cli("status", str(site / "sglang"))
    assert status.returncode == 0
    assert status.stdout.splitlines()[1:] == [
        f"  {note}",
        f"  {touched.package_path}: matches neither the base nor the series",
    ]
    assert snapshot(site) == before


def _status_lines(run_cli, package: Path) -> list[str]:
    proc = run_cli("status", str(package))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"{package}: modified"
    return [line.removeprefix("  ") for line in lines[1:]]


def test_cli_the_series_without_the_record_is_named_and_reverts(
    installed_site, changes, tmp_path, run_cli
):
    """Before: `status` said "modified" naming no file, `apply --revert` blamed an edit."""
    site = tmp_path / "site"
    shutil.copytree(installed_site, site, symlinks=True)
    package, original = site / "sglang", snapshot(site)
    assert run_cli("apply", str(package)).returncode == 0
    (package / MANIFEST).unlink()  # the series' bytes, without the record of `gdn-parity apply`
    patched = snapshot(site)
    touched = [c for c in changes if c.in_package]
    note = (
        f"every file the series touches holds the series' bytes, but there is no {MANIFEST}, "
        "the record `gdn-parity apply` writes: the series was applied some other way, or the "
        "record was deleted; `gdn-parity apply --revert` restores sglang 0.5.23"
    )
    assert _status_lines(run_cli, package) == [
        note,
        *[f"{c.package_path}: holds the series' bytes" for c in touched],
    ]
    proc = run_cli("apply", str(package))
    assert_refused(proc, f"nothing was changed: {package} is modified: {note}: ")
    assert proc.stderr.rstrip().endswith(
        f"{touched[2].package_path}: holds the series' bytes; and {len(touched) - 3} more "
        "(`gdn-parity status` names them all)"
    )
    assert snapshot(site) == patched
    reverted = run_cli("apply", "--revert", str(package))
    assert reverted.returncode == 0, reverted.stderr
    assert snapshot(site) == original


def test_cli_sglang_reinstalled_over_the_series_is_named_and_reverts(
    installed_site, changes, tmp_path, run_cli
):
    """What `pip install --force-reinstall sglang==0.5.23` leaves over a patched package: the
    wheel's files are back; the files the series adds and the record are not the wheel's."""
    site = tmp_path / "site"
    shutil.copytree(installed_site, site, symlinks=True)
    package, original = site / "sglang", snapshot(site)
    assert run_cli("apply", str(package)).returncode == 0
    touched = [c for c in changes if c.in_package]
    in_the_wheel = [c for c in touched if c.before is not None]
    assert 0 < len(in_the_wheel) < len(touched)
    for change in in_the_wheel:
        (package / change.package_path).write_bytes(change.before)
    assert _status_lines(run_cli, package) == [
        f"{MANIFEST} records an apply, but {len(in_the_wheel)} of the {len(touched)} files the "
        "series touches hold sglang 0.5.23's bytes (sglang reinstalled over the patched "
        "package, or files put back by hand); `gdn-parity apply --revert` restores sglang "
        "0.5.23",
        *[f"{c.package_path}: holds the base's bytes" for c in in_the_wheel],
    ]
    reverted = run_cli("apply", "--revert", str(package))
    assert reverted.returncode == 0, reverted.stderr
    assert snapshot(site) == original


def test_cli_python_targets_another_environments_sglang(installed_site, tmp_path, run_cli):
    """gdn-parity runs in its own venv; --python names the server's, whose sglang it patches."""
    venv = tmp_path / "server-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    shutil.copytree(installed_site / "sglang", Path(purelib) / "sglang", symlinks=True)
    package = Path(purelib) / "sglang"
    before = snapshot(package)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    assert f"{package}: unpatched" in run_cli("status", "--python", str(python), env=env).stdout
    relative = run_cli("status", "--python", "server-venv/bin/python", env=env, cwd=tmp_path)
    assert f"{package}: unpatched" in relative.stdout, relative.stderr  # from the caller's cwd
    applied = run_cli("apply", "--python", str(python), env=env)
    assert applied.returncode == 0, applied.stderr
    assert f"in {package}" in applied.stdout
    assert f"{package}: patched" in run_cli("status", "--python", str(python), env=env).stdout
    assert run_cli("apply", "--python", str(python), "--revert", env=env).returncode == 0
    assert snapshot(package) == before


# --- git checkouts -----------------------------------------------------------


def _run(repo: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, check=True, **kwargs
    )


@pytest.fixture
def checkout(series, tmp_path) -> Path:
    """A clone of the base commit with a user identity, as an sglang checkout would be."""
    repo = tmp_path / "sglang"
    subprocess.run(["git", "clone", "--quiet", str(base_repo(series)), str(repo)], check=True)
    _run(repo, "config", "user.name", "Reviewer")
    _run(repo, "config", "user.email", "reviewer@example.com")
    return repo


def _checkout_state(repo: Path) -> tuple[str, str, dict]:
    head = git_out(repo, "rev-parse", "HEAD")
    status = git_out(repo, "status", "--porcelain", "--untracked-files=all")
    return head, status, snapshot(repo / "python" / "sglang")


def test_checkout_apply_makes_one_commit_per_patch(checkout, changes, series):
    base = git_out(checkout, "rev-parse", "HEAD")
    assert CheckoutTarget(checkout, series).apply(changes).count == len(series.patches)
    log = git_out(checkout, "log", "--format=%s", f"{base}..HEAD").splitlines()
    assert len(log) == len(series.patches)
    assert all(subject.startswith("[") for subject in log)
    for change in changes:
        path = checkout / change.path
        assert (path.read_bytes() if path.exists() else None) == change.after
    with pytest.raises(GdnParityError, match="already applied"):
        CheckoutTarget(checkout, series).apply(changes)


def test_checkout_without_a_git_identity_is_refused_naming_the_fix(
    checkout, changes, series, tmp_path, monkeypatch
):
    """A new machine's git has no identity, and git am then fails after its log is written.
    Refused first, with the commands that set one (new-user run, helper-16: before, the fix
    was only in git am's log)."""
    _run(checkout, "config", "--unset", "user.name")
    _run(checkout, "config", "--unset", "user.email")
    monkeypatch.setenv("HOME", str(tmp_path / "no-identity-home"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("AUTHOR_NAME", "AUTHOR_EMAIL", "COMMITTER_NAME", "COMMITTER_EMAIL"):
        monkeypatch.delenv(f"GIT_{name}", raising=False)
    monkeypatch.delenv("EMAIL", raising=False)
    before = _checkout_state(checkout)
    with pytest.raises(GdnParityError, match="git has no identity") as refused:
        CheckoutTarget(checkout, series).apply(changes)
    assert f"git -C {checkout} config user.email you@example.com" in str(refused.value)
    assert "\n" not in str(refused.value)
    assert _checkout_state(checkout) == before


def test_checkout_with_an_uncommitted_edit_is_modified(checkout, changes, series):
    """Regression (new-user check): status read only HEAD, so an edit not yet committed
    to a file the series touches left the checkout ``unpatched``."""
    touched = next(c.path for c in changes if c.before is not None)
    with open(checkout / touched, "ab") as f:
        f.write(b"# a local edit\n")
    status = CheckoutTarget(checkout, series).status(changes)
    assert status.state is State.MODIFIED
    assert status.details == [f"{touched}: has uncommitted changes"]
    before = _checkout_state(checkout)
    with pytest.raises(GdnParityError, match="uncommitted changes"):
        CheckoutTarget(checkout, series).apply(changes)
    assert _checkout_state(checkout) == before


def test_checkout_with_part_of_the_series_names_its_files(checkout, changes, series):
    _run(checkout, "am", "--quiet", "--keep-non-patch", str(series.patch_paths()[0]))
    first = set(git_out(checkout, "show", "--format=", "--name-only", "HEAD").splitlines())
    status = CheckoutTarget(checkout, series).status(changes)
    assert status.state is State.MODIFIED
    assert {line.split(": ")[0] for line in status.details} == first
    holding = [line for line in status.details if line.endswith(": holds the series' bytes")]
    assert holding and status.note == (
        f"{len(holding)} of the {len(changes)} files the series touches hold the series' bytes "
        "at HEAD: is part of the series committed here (git log)? `git am` the rest, or start "
        "again from sglang 0.5.23"
    )
    before = _checkout_state(checkout)
    with pytest.raises(GdnParityError, match="is part of the series committed here"):
        CheckoutTarget(checkout, series).apply(changes)
    assert _checkout_state(checkout) == before


def test_checkout_dirty_tree_is_refused_and_unchanged(checkout, changes, series):
    (checkout / "python" / "sglang" / "version.py").write_text("# wip\n")
    before = _checkout_state(checkout)
    with pytest.raises(GdnParityError, match="uncommitted changes"):
        CheckoutTarget(checkout, series).apply(changes)
    assert _checkout_state(checkout) == before


def test_checkout_on_another_base_is_refused_and_unchanged(checkout, changes, series):
    touched = next(c for c in changes if c.before is not None)
    path = checkout / touched.path
    path.write_bytes(path.read_bytes() + b"# newer upstream\n")
    _run(checkout, "commit", "-qam", "newer upstream")
    before = _checkout_state(checkout)
    with pytest.raises(GdnParityError, match="not sglang 0.5.23"):
        CheckoutTarget(checkout, series).apply(changes)
    assert _checkout_state(checkout) == before


def test_checkout_failed_git_am_leaves_it_exactly_as_it_was(
    checkout, changes, series, scratch_cache
):
    # A commit-msg style hook rejects the last patch: `git am` fails after the
    # checks passed and after every earlier patch was committed.
    hook = checkout / ".git" / "hooks" / "applypatch-msg"
    hook.write_text(
        "#!/bin/sh\n"
        f'n=$(($(cat "$0.count" 2>/dev/null || echo 0) + 1)); echo $n > "$0.count"\n'
        f"[ $n -lt {len(series.patches)} ]\n"
    )
    hook.chmod(0o755)
    before = _checkout_state(checkout)
    with pytest.raises(GdnParityError, match="left as it was") as err:
        CheckoutTarget(checkout, series).apply(changes)
    assert f"(git am's output: {scratch_cache / 'logs'}/" in str(err.value)
    assert _checkout_state(checkout) == before
    assert not (checkout / ".git" / "rebase-apply").exists()
