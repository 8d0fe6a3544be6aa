"""Apply the series to an installed sglang package directory, revert it, report status.

Before anything is written, the version and the sha256 of every file the series
touches are checked against the base. Files are replaced all or nothing; a
manifest beside them records what was applied so revert restores the exact bytes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from gdn_parity.errors import GdnParityError
from gdn_parity.plan import FileChange, sha256_bytes

MANIFEST = ".gdn-parity-applied.json"
_VERSION_RE = re.compile(r"^__version__ = version = '([^']+)'$", re.MULTILINE)


def site_packages_sglang() -> Path:
    """The ``sglang`` package directory of the running interpreter, found without importing it."""
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise GdnParityError("no sglang package is installed for this Python")
    return Path(next(iter(spec.submodule_search_locations)))


def package_version(target: Path) -> str:
    path = target / "_version.py"
    if not path.is_file():
        raise GdnParityError(f"{target} is not an installed sglang package (no _version.py)")
    match = _VERSION_RE.search(path.read_text())
    if not match:
        raise GdnParityError(f"cannot read the sglang version from {path}")
    return match.group(1)


def _current(target: Path, change: FileChange) -> bytes | None:
    path = target / change.package_path
    return path.read_bytes() if path.is_file() else None


@dataclass(frozen=True)
class PackageStatus:
    state: str  # "unpatched", "patched" or "modified"
    details: list[str]


def package_status(target: Path, changes: list[FileChange]) -> PackageStatus:
    """Compare every touched file with its base and patched bytes."""
    pkg = [c for c in changes if c.in_package]
    current = {c.path: _current(target, c) for c in pkg}
    if all(current[c.path] == c.before for c in pkg) and not (target / MANIFEST).exists():
        return PackageStatus("unpatched", [])
    if all(current[c.path] == c.after for c in pkg) and (target / MANIFEST).exists():
        return PackageStatus("patched", [])
    details = [
        f"{c.package_path}: matches neither the base nor the series"
        for c in pkg
        if current[c.path] not in (c.before, c.after)
    ]
    details += [
        f"{c.package_path}: {'base' if current[c.path] == c.before else 'patched'} bytes"
        for c in pkg
        if current[c.path] in (c.before, c.after)
    ]
    return PackageStatus("modified", details)


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
    """Make each ``package path -> bytes`` true, or restore everything on failure."""
    saved: dict[Path, bytes | None] = {}
    try:
        for rel, data in wanted.items():
            path = target / rel
            saved[path] = path.read_bytes() if path.is_file() else None
            if data is None:
                if path.exists():
                    path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".gdn-parity-tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
    except OSError as exc:
        for path, data in saved.items():
            if data is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(data)
        raise GdnParityError(f"nothing was changed: writing failed ({exc})") from exc


def apply_to_package(target: Path, changes: list[FileChange], version: str, digest: str) -> int:
    """Patch ``target``; return how many files changed."""
    found = package_version(target)
    if found != version:
        raise GdnParityError(f"{target} is sglang {found}; the series is for sglang {version}")
    status = package_status(target, changes)
    if status.state == "patched":
        raise GdnParityError(f"the series is already applied to {target}")
    if status.state == "modified":
        raise GdnParityError(
            f"nothing was changed: {target} has files that differ from sglang "
            f"{version}:\n  " + "\n  ".join(status.details)
        )
    pkg = [c for c in changes if c.in_package]
    _check_writable(target, pkg)
    manifest = {
        "series_digest": digest,
        "files": {
            c.package_path: {"before": sha256_bytes(c.before), "after": sha256_bytes(c.after)}
            for c in pkg
        },
    }
    wanted = {c.package_path: c.after for c in pkg}
    wanted[MANIFEST] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    _write_all(target, wanted)
    return len(pkg)


def revert_package(target: Path, changes: list[FileChange]) -> int:
    """Restore the base bytes of every touched file; return how many changed."""
    status = package_status(target, changes)
    if status.state == "unpatched":
        raise GdnParityError(f"the series is not applied to {target}")
    if status.state == "modified":
        raise GdnParityError(
            f"nothing was changed: {target} was modified after the series was "
            "applied:\n  " + "\n  ".join(status.details)
        )
    pkg = [c for c in changes if c.in_package]
    _check_writable(target, pkg)
    wanted: dict[str, bytes | None] = {c.package_path: c.before for c in pkg}
    wanted[MANIFEST] = None
    _write_all(target, wanted)
    return len(pkg)
