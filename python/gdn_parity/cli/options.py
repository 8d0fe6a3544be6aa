"""What several verbs share: the series (loaded only by verbs that need it) and typed values."""

from __future__ import annotations

import argparse
import errno
import importlib.metadata
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from gdn_parity.errors import GdnParityError
from gdn_parity.queue.series import Series, load_series


def series_of(args: argparse.Namespace) -> Series:
    """The series named by ``--patches``, or the default one."""
    return load_series(args.patches)


def require_extra(extra: str, verb: str) -> None:
    """Refuse a verb whose packages, those of gdn-parity's ``[extra]``, are not installed.

    Before any work: without them every demo worker fails on the same import, after the
    trees were built. Whether each package is installed is all that is checked (not its
    version). A gdn-parity that is not installed (run from a source tree) has no list.
    """
    try:
        requires = importlib.metadata.requires("gdn-parity") or []
    except importlib.metadata.PackageNotFoundError:
        return
    marker = re.compile(rf"""extra\s*==\s*["']{re.escape(extra)}["']""")
    missing = []
    for requirement in requires:
        spec, _, condition = requirement.partition(";")
        name = re.match(r"[A-Za-z0-9._-]+", spec.strip())
        if name is None or not marker.search(condition):
            continue
        try:
            importlib.metadata.version(name.group())
        except importlib.metadata.PackageNotFoundError:
            missing.append(name.group())
    if missing:
        raise GdnParityError(
            f"{verb} needs gdn-parity's [{extra}] extra, which is not installed (missing: "
            f"{', '.join(missing)}): pip install '/path/to/gdn-parity[{extra}]', or "
            f"-e '.[{extra}]' in a checkout"
        )


def integer(text: str) -> int:
    """An argparse type: an integer (argparse's own ``int`` says "invalid int value")."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def int_at_least(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer no smaller than ``low`` (and no larger than ``high``)."""

    def parse(text: str) -> int:
        value = integer(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"{text!r} must be at least {low}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"{text!r} must be at most {high}")
        return value

    return parse


positive_int = int_at_least(1)


def path(text: str) -> Path:
    """An argparse type: a path that names something (``''`` would mean the current directory)."""
    if not text:
        raise argparse.ArgumentTypeError("'' is an empty path (the current directory is .)")
    return Path(text)


def program(text: str) -> Path:
    """An argparse type: a program as a shell finds it, as an absolute path (it may be run
    from another directory). A name with a ``/`` is a path from the current directory; a
    bare name is looked up on ``PATH``."""
    if "/" in text or not text:
        return path(text).absolute()
    found = shutil.which(text)
    if found is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a program on PATH (to run a file in this directory, write ./{text})"
        )
    return Path(found).absolute()


def port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not in 0-65535")
    return value


# The longest wait an option takes. A socket's timeout overflows past about 9.2e9 s (its
# nanoseconds are a 64-bit integer); no request to a server takes a day.
MAX_SECONDS = 86_400


def _positive(text: str, kind: str) -> float:
    """A finite number above 0, else argparse's error saying it is not ``kind``."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not {kind}")
    return value


def positive_number(text: str) -> float:
    """An argparse type: a finite number above 0."""
    return _positive(text, "a finite number above 0")


def positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds above 0, at most ``MAX_SECONDS``."""
    value = _positive(text, "a finite number of seconds above 0")
    if value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is more than {MAX_SECONDS} seconds (a day), the longest wait accepted"
        )
    return value


def _comma_list(text: str, item: Callable[[str], float], kind: str, example: str) -> list:
    """``text`` split at commas, each item converted; no empty item."""
    try:
        return [item(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of {kind}, e.g. {example}"
        ) from None


def int_list_at_least(low: int, high: int | None = None) -> Callable[[str], list[int]]:
    """An argparse type: ``1,2,3``, every item an integer no smaller than ``low`` (and no
    larger than ``high``)."""

    def parse(text: str) -> list[int]:
        values = _comma_list(text, int, "integers", "1,2,3")
        if min(values) < low:
            raise argparse.ArgumentTypeError(f"{text!r}: every item must be at least {low}")
        if high is not None and max(values) > high:
            raise argparse.ArgumentTypeError(f"{text!r}: every item must be at most {high}")
        return values

    return parse


positive_int_list = int_list_at_least(1)


def probability_list(text: str) -> list[float]:
    """``0.5,0.9``: every item a number in [0, 1]."""
    values = _comma_list(text, float, "numbers", "0.5,0.9")
    if not all(0 <= v <= 1 for v in values):  # NaN fails too
        raise argparse.ArgumentTypeError(f"{text!r}: every item must be a probability in [0, 1]")
    return values


def writable_dirs(*wanted: tuple[Path | None, str]) -> None:
    """Refuse, before any work, a directory (``(path, option)``; a None path is not asked
    for) that exists as something else or cannot be written; every one is looked at before
    any is probed.

    The probes make nothing, so a refused verb leaves the file system as it was; the verb
    makes each directory when it has something to write.
    """
    asked = [(directory, option) for directory, option in wanted if directory is not None]
    for directory, option in asked:
        if directory.exists() and not directory.is_dir():
            raise GdnParityError(f"{option} {directory} exists and is not a directory")
    for directory, option in asked:
        _probe(directory, option)


def _probe(directory: Path, option: str) -> None:
    """Refuse ``directory`` unless a file can be written where making it begins: in it when it
    exists, else in the nearest directory above it.

    The test is the real thing, because permission bits say nothing for root or on special
    file systems: a file is opened there, unnamed (``O_TMPFILE``, which changes nothing on
    Linux's local file systems; where a file system lacks it, Python's ``TemporaryFile``
    names the file and removes it at once).
    """
    start = directory
    while not os.path.lexists(start):
        start = start.parent
    try:
        if not start.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, f"{start} is not a directory")
        with tempfile.TemporaryFile(dir=start):
            pass
    except OSError as exc:
        raise GdnParityError(
            f"{option} {directory} cannot be written: {exc.strerror or exc}"
        ) from exc
