"""The patch series: ``patches/series`` names the base and lists the patches in order.

Format (quilt-compatible: one patch per line, ``#`` starts a comment)::

    # base: sglang==0.5.23
    # base-wheel: sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl
    # base-wheel-sha256: <hex>
    # base-commit: <hex>
    0001-....patch
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from gdn_parity.errors import GdnParityError

SERIES_FILE = "series"
_KEYS = ("base", "base-wheel", "base-wheel-sha256", "base-commit")
_HEADER = "# gdn-parity patch series for SGLang. Regenerate with `gdn-parity export`."


def packaged_patches_dir() -> Path:
    """The copy of ``patches/`` a wheel ships (``setup.py`` makes it at build time)."""
    return Path(__file__).resolve().parents[1] / "_patches"


def default_patches_dir() -> Path:
    """``$GDN_PARITY_PATCHES``; else the series an installed wheel ships; else the checkout's.

    An editable install ships no copy, so it reads ``patches/`` beside ``python/``.
    """
    env = os.environ.get("GDN_PARITY_PATCHES")
    if env:
        return Path(env)
    if (packaged_patches_dir() / SERIES_FILE).is_file():
        return packaged_patches_dir()
    return Path(__file__).resolve().parents[3] / "patches"


@dataclass(frozen=True)
class Series:
    """The parsed series: base pins and the ordered patch file names."""

    directory: Path
    base: str
    wheel_name: str
    wheel_sha256: str
    base_commit: str
    patches: tuple[str, ...]

    @property
    def version(self) -> str:
        """The sglang version of the base, e.g. ``0.5.23``."""
        return self.base.split("==", 1)[1]

    def patch_paths(self) -> list[Path]:
        return [self.directory / name for name in self.patches]

    def digest(self) -> str:
        """sha256 over the series file and every patch's bytes: names the exact series."""
        h = hashlib.sha256()
        h.update((self.directory / SERIES_FILE).read_bytes())
        for path in self.patch_paths():
            h.update(path.read_bytes())
        return h.hexdigest()

    def with_patches(self, patches: list[str]) -> Series:
        return Series(
            self.directory,
            self.base,
            self.wheel_name,
            self.wheel_sha256,
            self.base_commit,
            tuple(patches),
        )

    def prefix(self, count: int) -> Series:
        """The series of the first ``count`` patches (0: the base alone)."""
        return self.with_patches(list(self.patches[:count]))

    def render(self) -> str:
        values = (self.base, self.wheel_name, self.wheel_sha256, self.base_commit)
        lines = [_HEADER]
        lines += [f"# {key}: {value}" for key, value in zip(_KEYS, values, strict=True)]
        lines += list(self.patches)
        return "\n".join(lines) + "\n"


def load_series(directory: Path | None = None) -> Series:
    """Parse ``directory/series``; every listed patch must exist."""
    given = directory
    directory = (directory or default_patches_dir()).resolve()
    path = directory / SERIES_FILE
    if not path.is_file():
        raise GdnParityError(_no_series_file(given, path))
    try:
        text = path.read_text()
    except UnicodeDecodeError as exc:
        raise GdnParityError(f"{path} is not a series file: it is not UTF-8 text") from exc
    meta: dict[str, str] = {}
    patches: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            key, sep, value = line[1:].strip().partition(":")
            if sep and key.strip() in _KEYS:
                meta[key.strip()] = value.strip()
            continue
        patches.append(line)
    missing_keys = [key for key in _KEYS if key not in meta]
    if missing_keys:
        raise GdnParityError(f"{path} lacks the header line(s): {missing_keys}")
    if not meta["base"].startswith("sglang=="):
        raise GdnParityError(f"{path}: base must read 'sglang==X.Y.Z'")
    missing = [name for name in patches if not (directory / name).is_file()]
    if missing:
        raise GdnParityError(f"{path} lists patches that do not exist: {missing}")
    return Series(
        directory,
        meta["base"],
        meta["base-wheel"],
        meta["base-wheel-sha256"],
        meta["base-commit"],
        tuple(patches),
    )


def _no_series_file(given: Path | None, path: Path) -> str:
    """What to say when ``path`` is missing: about the directory the user named, if any."""
    if given is not None:
        return (
            f"--patches {given} has no series file, so it is not a gdn-parity patches/ "
            "directory: name the patches/ directory of a gdn-parity checkout"
        )
    if os.environ.get("GDN_PARITY_PATCHES"):
        return (
            f"no series file at {path}: GDN_PARITY_PATCHES must name a gdn-parity patches/ "
            "directory, or be unset"
        )
    return f"no series file at {path}: pass --patches DIR or set GDN_PARITY_PATCHES"
