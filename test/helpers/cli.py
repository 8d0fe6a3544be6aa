"""What every refused command line must look like."""

from __future__ import annotations

import signal
import subprocess


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
