"""What every refused command line must look like."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

from gdn_parity.queue.base import base_repo
from gdn_parity.queue.cache import cache_lock
from gdn_parity.queue.series import Series


def assert_refused(proc: subprocess.CompletedProcess, fragment: str) -> None:
    """Exit status 2, no traceback, and exactly one line on stderr that says ``fragment``."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert fragment in lines[0], proc.stderr


def sigint_as_a_terminal() -> None:
    """``preexec_fn`` for a child that a test interrupts with SIGINT, as Ctrl-C would.

    A child inherits an ignored SIGINT (pytest under ``nohup``, or a CI runner that
    ignores it), and Python installs its KeyboardInterrupt handler only over the
    default disposition; so the child restores the default before it runs.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def assert_failed_on_one_line(proc: subprocess.CompletedProcess, verb: str, fragment: str) -> Path:
    """A failure that is not bad input: exit status 2 (not 1, a verdict), no traceback, and
    after the progress notes, which name the verb (``gdn-parity VERB: ...``), exactly one
    line, the verb's error, which says ``fragment`` and names the log file that holds the
    detail; that file's path."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    *notes, error = proc.stderr.splitlines()
    assert all(is_note(line, verb) for line in notes), proc.stderr
    assert error.startswith(f"gdn-parity {verb}: error: "), proc.stderr
    assert fragment in error, proc.stderr
    logs = re.findall(r": (/\S+\.log)\)", error)
    assert len(logs) == 1, error
    return Path(logs[0])


def is_note(line: str, verb: str) -> bool:
    """``line`` is a progress note of ``verb``: it names the verb, and it is no error."""
    prefix = f"gdn-parity {verb}: "
    return line.startswith(prefix) and not line.startswith(f"{prefix}error: ")


def scratch_cache_in(series: Series, directory: Path) -> Path:
    """``directory/cache``: a cache whose base is the session cache's (no wheel to fetch or
    base to lay out again), for a test whose trees and logs must stay out of the user's."""
    with cache_lock():
        base = base_repo(series)
    cache = directory / "cache"
    cache.mkdir()
    (cache / base.name).symlink_to(base)
    return cache
