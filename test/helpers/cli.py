"""What every refused command line must look like."""

from __future__ import annotations

import subprocess


def assert_refused(proc: subprocess.CompletedProcess, fragment: str) -> None:
    """Exit status 2, no traceback, and exactly one line on stderr that says ``fragment``."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert fragment in lines[0], proc.stderr
