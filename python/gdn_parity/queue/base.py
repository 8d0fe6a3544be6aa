"""The base: the pinned sglang wheel from PyPI, laid out upstream-shaped in a git repo.

``python/sglang/...`` holds the wheel's ``sglang/`` package byte for byte. The
base commit has a fixed identity and date, so its hash is the same everywhere;
``patches/series`` pins both the wheel's sha256 and that hash.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from gdn_parity.errors import GdnParityError
from gdn_parity.logs import keep_log, last_line
from gdn_parity.notes import note
from gdn_parity.queue.cache import cache_dir
from gdn_parity.queue.git import FIXED_DATE, git, git_out, is_git_repo
from gdn_parity.queue.series import SERIES_FILE, Series

BASE_BRANCH = "base"
PACKAGE_PREFIX = "sglang/"
UPSTREAM_PREFIX = "python/"


def sha256_file(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def fetch_wheel(series: Series) -> Path:
    """The cached base wheel, downloaded with pip on first use; its sha256 is checked."""
    wheels = cache_dir() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    wheel = wheels / series.wheel_name
    if not wheel.is_file():
        note(f"downloading {series.base} ({series.wheel_name}) into {wheels}, once")
        with tempfile.TemporaryDirectory(dir=wheels) as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps"]
            cmd += ["--only-binary=:all:", "--dest", tmp, series.base]
            cmd += ["--platform", "manylinux_2_34_x86_64", "--python-version", "3.11"]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            got = Path(tmp) / series.wheel_name
            if proc.returncode != 0 or not got.is_file():
                why = last_line(proc.stderr) if proc.returncode else "pip wrote another file"
                log = keep_log("pip-download", f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
                raise GdnParityError(
                    f"could not download {series.base} ({series.wheel_name}): {why} (pip's "
                    f"output: {log}); place the wheel at {wheel} to work offline"
                )
            os.replace(got, wheel)
    actual = sha256_file(wheel)
    if actual != series.wheel_sha256:
        raise GdnParityError(
            f"{wheel} has sha256 {actual}, but {series.directory / SERIES_FILE} pins "
            f"{series.wheel_sha256}: if the wheel is corrupt, delete it and retry; if the "
            "series' base-wheel-sha256 is wrong, correct it"
        )
    return wheel


def _extract_package(wheel: Path, dest: Path) -> None:
    """Write the wheel's ``sglang/`` files under ``dest/python/`` with mode 0644."""
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.is_dir() or not info.filename.startswith(PACKAGE_PREFIX):
                continue
            target = dest / UPSTREAM_PREFIX / info.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))
            target.chmod(0o644)


def _make_base_commit(repo: Path, series: Series) -> str:
    git(repo, "init", "--quiet", f"--initial-branch={BASE_BRANCH}")
    git(repo, "config", "core.autocrlf", "false")
    git(repo, "config", "core.fileMode", "true")
    git(repo, "add", "--all", "--force", ".")
    message = (
        f"sglang {series.version} (base)\n\n"
        f"The sglang/ package of {series.wheel_name}\n"
        f"(sha256 {series.wheel_sha256}) laid out as upstream python/sglang/.\n"
    )
    dates = {"GIT_AUTHOR_DATE": FIXED_DATE, "GIT_COMMITTER_DATE": FIXED_DATE}
    git(repo, "commit", "--quiet", "--no-verify", "-m", message, env=dates)
    return git_out(repo, "rev-parse", "HEAD")


def _branch_commit(repo: Path, branch: str) -> str:
    """The commit ``branch`` of ``repo`` is at; '' when there is no such branch."""
    proc = git(repo, "rev-parse", "--verify", "--quiet", f"{branch}^{{commit}}", check=False)
    return proc.stdout.decode().strip() if proc.returncode == 0 else ""


def _base_root(series: Series) -> Path:
    return cache_dir() / f"base-{series.version}-{series.wheel_sha256[:12]}"


def _cached_base(series: Series) -> Path | None:
    """The cache's base repo where it holds the pinned commit (a stale one is removed)."""
    root = _base_root(series)
    if is_git_repo(root):
        if _branch_commit(root, BASE_BRANCH) == series.base_commit:
            return root
        shutil.rmtree(root)
    elif root.exists() or root.is_symlink():
        raise GdnParityError(
            f"{root} is not a git repository holding the base (an interrupted or damaged "
            "cache): delete it and retry, and gdn-parity lays the base out again"
        )
    return None


def _lay_out_base(series: Series, fill: Callable[[Path], None], source: str) -> Path:
    """Commit the files ``fill`` writes into a new directory as the base, check that the
    commit is the pinned one, and make the directory the cache's base repo."""
    root = _base_root(series)
    note(f"laying out {source} as upstream's python/sglang/ in {root}, once")
    cache_dir().mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="base-", dir=cache_dir()))
    try:
        fill(tmp)
        commit = _make_base_commit(tmp, series)
        if commit != series.base_commit:
            raise GdnParityError(
                f"the base commit built from {source} is {commit}, but the "
                f"series pins {series.base_commit}: the layout or git changed."
            )
        os.replace(tmp, root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return root


def base_repo(series: Series) -> Path:
    """A cached git repo whose ``base`` branch is the pinned base commit."""
    cached = _cached_base(series)
    if cached is not None:
        return cached
    wheel = fetch_wheel(series)
    return _lay_out_base(series, lambda tmp: _extract_package(wheel, tmp), wheel.name)


def base_repo_from_tree(series: Series, tree: Path) -> Path:
    """The cached base repo, laid out without the wheel from ``tree``: the files of a tree
    of the whole series (``gdn-parity tree``, packed without .git), with the patches taken
    back last first. For a machine that cannot fetch the wheel (a GPU run,
    ``benchmark/gpu/unpack_tree.sh``). Refuses where the result is not the pinned commit."""
    cached = _cached_base(series)
    if cached is not None:
        return cached

    def fill(tmp: Path) -> None:
        shutil.copytree(tree, tmp, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git"))
        # A repository of its own: git apply in a directory of another one (the cache in a
        # checkout) would skip the paths outside that directory.
        git(tmp, "init", "--quiet")
        for patch in reversed(series.patch_paths()):
            proc = git(tmp, "apply", "--reverse", str(patch), check=False)
            if proc.returncode != 0:
                raise GdnParityError(
                    f"{tree} is not a tree of this series: {patch.name} does not come "
                    f"off it ({last_line(proc.stderr.decode(errors='replace'))})"
                )
        shutil.rmtree(tmp / ".git")

    return _lay_out_base(series, fill, f"{tree} without the series")
