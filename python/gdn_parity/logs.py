"""Where a failure's detail goes: a log file in the cache, which its one-line error names.

A failed ``git am``, pip download, smoke import or demo worker says what failed on one
line; the tool's output (a traceback, pip's resolver report, git's hunks) is kept in
``logs/`` under the cache for whoever wants the detail.
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path

from gdn_parity.errors import GdnParityError
from gdn_parity.queue.cache import cache_dir


def log_path(what: str) -> Path:
    """A new, empty log file ``logs/<time>-<what>-<unique>.log`` in the cache."""
    directory = cache_dir() / "logs"
    if os.path.lexists(directory) and not directory.is_dir():
        raise GdnParityError(
            f"{directory} is not a directory, so the cache has nowhere to keep a failure's "
            f"detail: remove it (rm {directory}) and retry, and gdn-parity makes logs/ again"
        )
    directory.mkdir(parents=True, exist_ok=True)
    prefix = f"{time.strftime('%Y%m%d-%H%M%S')}-{what}-"
    handle, name = tempfile.mkstemp(prefix=prefix, suffix=".log", dir=directory)
    with open(handle, "w"):
        pass
    return Path(name)


def keep_log(what: str, text: str) -> Path:
    """Write ``text`` to a new log file (``log_path``); its path."""
    path = log_path(what)
    path.write_text(text)
    return path


def last_line(text: str, otherwise: str = "no output") -> str:
    """The last non-blank line of ``text``, stripped: a traceback's exception, a tool's verdict."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else otherwise


def how_it_ended(returncode: int, output: str) -> str:
    """One line on a process that failed: the signal that killed it, else the last line of
    its ``output`` (a traceback's exception), else its exit status."""
    if returncode < 0:
        return f"it was killed by {signal.Signals(-returncode).name}"
    return last_line(output, f"it exited with status {returncode} and printed nothing")
