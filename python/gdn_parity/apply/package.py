"""Apply the series to an installed sglang package directory, revert it, report status.

Before anything is written, the version and the sha256 of every file the series
touches are checked against the base. Files are replaced all or nothing; a
manifest beside them records what was applied so revert restores the exact bytes.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import secrets
import stat
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
    refusal_line,
    require,
)
from gdn_parity.errors import GdnParityError
from gdn_parity.logs import how_it_ended
from gdn_parity.queue.changes import FileChange, sha256_bytes
from gdn_parity.queue.series import Series

MANIFEST = ".gdn-parity-applied.json"
# What to do where an interpreter has no sglang (``site_packages_sglang``, ``python_sglang``).
NO_SGLANG_FIX = (
    "name the Python of the environment that has sglang 0.5.23 (the server's) with --python, "
    "or sglang's directory as the target"
)


def site_packages_sglang() -> Path:
    """The ``sglang`` package directory of the running interpreter, found without importing it."""
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise GdnParityError(f"no sglang package is installed for this Python: {NO_SGLANG_FIX}")
    return Path(next(iter(spec.submodule_search_locations)))


# Run by another interpreter: where its ``import sglang`` would come from (without importing
# it), as one tagged line, so that a program that is not Python cannot pass for one.
_ANSWER = "gdn-parity-sglang-location "
_FIND_SGLANG = f"""
import importlib.util, json
spec = importlib.util.find_spec("sglang")
found = None
if spec is not None and spec.submodule_search_locations:
    found = next(iter(spec.submodule_search_locations))
print({_ANSWER!r} + json.dumps(found))
"""


def python_sglang(python: Path) -> Path:
    """The ``sglang`` package directory of another interpreter (e.g. a server's venv)."""
    try:
        proc = subprocess.run(
            [str(python), "-c", _FIND_SGLANG],
            capture_output=True,
            text=True,
            timeout=120,
            cwd="/",  # not the caller's directory: only what that Python has installed
        )
    except subprocess.TimeoutExpired as exc:
        raise GdnParityError(f"--python {python} did not answer within 120 s") from exc
    except OSError as exc:
        raise GdnParityError(
            f"cannot run --python {python} as a Python interpreter: {exc.strerror or exc}"
        ) from exc
    if proc.returncode != 0:
        why = how_it_ended(proc.returncode, proc.stdout + "\n" + proc.stderr)
        raise GdnParityError(f"--python {python} failed to look for sglang: {why}")
    answers = [
        line[len(_ANSWER) :] for line in proc.stdout.splitlines() if line.startswith(_ANSWER)
    ]
    if len(answers) != 1:
        raise GdnParityError(
            f"--python {python} is not a Python interpreter: it exited 0 without printing "
            "where sglang is"
        )
    found = json.loads(answers[0])
    if found is None:
        raise GdnParityError(f"no sglang package is installed for {python}: {NO_SGLANG_FIX}")
    return Path(found)


def package_version(target: Path) -> str:
    """The string that ``_version.py`` assigns to ``__version__``, read without running it.

    Any spelling of the assignment: setuptools-scm's ``__version__ = version = '0.5.23'``
    (what the wheel ships), a bare ``__version__ = "0.5.23"``, an annotated one; the
    last one wins, as when Python runs the file.
    """
    path = target / "_version.py"
    if not path.is_file():
        raise GdnParityError(
            f"{target} is not an installed sglang package (no _version.py); "
            "for a git checkout, name its top directory"
        )
    try:
        module = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError) as exc:  # ValueError: a null byte
        raise GdnParityError(
            f"{path} is not Python source, so it names no sglang version: {exc}"
        ) from exc
    assigned, found = False, None
    for statement in module.body:
        if isinstance(statement, ast.Assign):
            targets, value = statement.targets, statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets, value = [statement.target], statement.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "__version__" for t in targets):
            literal = isinstance(value, ast.Constant) and isinstance(value.value, str)
            assigned, found = True, value.value if literal else None
    if not assigned:
        raise GdnParityError(
            f"{path} assigns nothing to __version__ (sglang's says "
            "__version__ = version = '0.5.23'), so it names no sglang version"
        )
    if found is None:
        raise GdnParityError(
            f"{path} computes __version__ (its last assignment is not a string literal), "
            "so its sglang version cannot be read without running it"
        )
    return found


def _check_writable(target: Path, changes: list[FileChange]) -> None:
    """Refuse read-only files and folders up front (root ignores permission bits)."""
    problems = []
    for change in changes:
        path = target / change.package_path
        if path.exists() and not path.stat().st_mode & stat.S_IWUSR:
            problems.append(f"{change.package_path} is read-only")
        parent = path.parent
        while not parent.exists():
            parent = parent.parent
        if not parent.stat().st_mode & stat.S_IWUSR or not os.access(parent, os.W_OK):
            problems.append(f"{parent} is not writable")
    if not os.access(target, os.W_OK) or not target.stat().st_mode & stat.S_IWUSR:
        problems.append(f"{target} is not writable")
    if problems:
        raise GdnParityError("nothing was changed: " + "; ".join(sorted(set(problems))))


def _write_all(target: Path, wanted: dict[str, bytes | None]) -> None:
    """Make each ``package path -> bytes`` true, or, where a write fails, put back every file
    it changed and remove what it made (temporary files and folders): nothing is left behind.
    A file that is replaced keeps its permission bits (a wheel installs some modules
    executable)."""
    saved: dict[Path, bytes | None] = {}
    made: list[Path] = []  # the folders and temporary files made, in order
    for rel, data in wanted.items():
        path = target / rel
        try:
            saved[path] = path.read_bytes() if path.is_file() else None
            if data is None:
                if path.exists():
                    path.unlink()
                continue
            _make_folders(path.parent, made)
            # A name of its own: one already there (a folder, another run's file) is not ours.
            tmp = path.with_name(f"{path.name}.{secrets.token_hex(4)}.gdn-parity-tmp")
            handle = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            made.append(tmp)
            with open(handle, "wb") as file:
                file.write(data)
            if saved[path] is not None:
                os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
            os.replace(tmp, path)
        except OSError as exc:
            failed = f"writing {path} failed: {exc.strerror or exc}"
            try:
                _undo(saved, made)
            except OSError as again:
                raise GdnParityError(
                    f"{failed}; putting the package back failed too ({again}): reinstall "
                    "sglang to restore its files"
                ) from again
            raise GdnParityError(f"nothing was changed: {failed}") from exc


def _make_folders(folder: Path, made: list[Path]) -> None:
    """Make ``folder`` and the missing folders above it, adding each to ``made``."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        folder.mkdir()
        made.append(folder)


def _undo(saved: dict[Path, bytes | None], made: list[Path]) -> None:
    """Put back the saved bytes of every file that changed (None: absent), then remove what
    was made, newest first (a temporary file that was renamed is gone already)."""
    for path, data in saved.items():
        if (path.read_bytes() if path.is_file() else None) == data:
            continue
        if data is None:
            path.unlink()
        else:
            path.write_bytes(data)
    for path in reversed(made):
        if path.is_dir():
            path.rmdir()
        else:
            path.unlink(missing_ok=True)


@dataclass(frozen=True)
class PackageTarget:
    """An installed ``sglang`` package directory: files are replaced, a manifest records it."""

    path: Path
    series: Series

    def _current(self, change: FileChange) -> bytes | None:
        path = self.path / change.package_path
        return path.read_bytes() if path.is_file() else None

    def check(self) -> None:
        """The directory is an installed sglang of the series' version."""
        version = self.series.version
        found = package_version(self.path)
        if found != version:
            raise GdnParityError(
                f"{self.path} is sglang {found}; the series is for sglang {version}"
            )

    def status(self, changes: list[FileChange]) -> Status:
        """Compare every touched file with its base and patched bytes, and the manifest."""
        self.check()
        applied = (self.path / MANIFEST).exists()
        status = file_status(
            [c for c in changes if c.in_package],
            self._current,
            lambda c: c.package_path,
            "the base nor the series",
            applied=applied,
        )
        if status.state is not State.MODIFIED:
            return status
        return replace(status, note=self._note(status, applied))

    def _note(self, status: Status, applied: bool) -> str:
        """What a modified package holds, and what to do about it."""
        version = self.series.version
        if status.holding[Holds.NEITHER]:
            return (
                f"{files_hold(status, Holds.NEITHER)} neither sglang {version}'s bytes nor the "
                "series' (edited, or from another version); gdn-parity changes nothing until "
                f"they do (reinstalling sglang {version} puts its files back)"
            )
        revert = f"`gdn-parity apply --revert` restores sglang {version}"
        if not applied:
            return (
                f"{files_hold(status, Holds.SERIES)} the series' bytes, but there is "
                f"no {MANIFEST}, the record `gdn-parity apply` writes: the series was applied "
                f"some other way, or the record was deleted; {revert}"
            )
        return (
            f"{MANIFEST} records an apply, but {files_hold(status, Holds.BASE)} "
            f"sglang {version}'s bytes (sglang reinstalled over the patched package, or "
            f"files put back by hand); {revert}"
        )

    def _write(self, changes: list[FileChange], wanted: dict[str, bytes | None]) -> int:
        """Make ``wanted`` (package path -> bytes; None: absent) true, after the write check."""
        pkg = [c for c in changes if c.in_package]
        _check_writable(self.path, pkg)
        _write_all(self.path, wanted)
        return len(pkg)

    def apply(self, changes: list[FileChange]) -> Done:
        require(
            self.status(changes),
            State.UNPATCHED,
            {
                State.PATCHED: f"the series is already applied to {self.path}",
                State.MODIFIED: f"nothing was changed: {self.path} is modified",
            },
        )
        pkg = [c for c in changes if c.in_package]
        manifest = {
            "series_digest": self.series.digest(),
            "files": {
                c.package_path: {"before": sha256_bytes(c.before), "after": sha256_bytes(c.after)}
                for c in pkg
            },
        }
        wanted = {c.package_path: c.after for c in pkg}
        wanted[MANIFEST] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
        count = self._write(changes, wanted)
        return Done(count, f"patched {count} file(s) in {self.path}")

    def revert(self, changes: list[FileChange]) -> Done:
        """Restore the base bytes of every touched file.

        Also where the manifest and the files disagree (the series applied some other
        way, sglang reinstalled over it): every file holds one of the two versions, so
        the base's bytes are restored exactly. A file that holds neither is refused.
        """
        status = self.status(changes)
        if status.state is State.UNPATCHED:
            raise GdnParityError(f"the series is not applied to {self.path}")
        if status.holding[Holds.NEITHER]:
            raise GdnParityError(
                refusal_line(f"nothing was changed: {self.path} is modified", status)
            )
        wanted: dict[str, bytes | None] = {
            c.package_path: c.before for c in changes if c.in_package
        }
        wanted[MANIFEST] = None
        count = self._write(changes, wanted)
        return Done(count, f"reverted {count} file(s) in {self.path}")
