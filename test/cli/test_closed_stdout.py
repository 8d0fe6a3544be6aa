"""A reader that closes stdout early (``gdn-parity smoke | head -1``) is not an error.

Like a program that SIGPIPE ends, the verb stops quietly with status 141 (128 + 13): not 0,
as its output was cut short; neither the verdict 1 nor the refusal 2. Before: ``gdn-parity:
error: Broken pipe`` and 2, or, when the write failed at exit, Python's "Exception ignored"
report and 120. stdout is a pipe whose reader is gone before the verb writes, so the write
fails whether stdout is unbuffered (while the verb runs) or buffered (at its end).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HEADER = {"type": "header", "format": "sglang-gdn-state-trace", "version": 1}
DIGEST = {"sha256": "s", "dtype": "bfloat16", "shape": [1], "absmax": 1.0, "l2": 1.0}


def _run_into_a_closed_pipe(args: list[str], unbuffered: bool) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    reader, writer = os.pipe()
    os.close(reader)
    try:
        return subprocess.run(
            [sys.executable, "-m", "gdn_parity.cli", *args],
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=600,
        )
    finally:
        os.close(writer)


@pytest.fixture
def trace(tmp_path) -> str:
    record = {"type": "state", "checkpoint": "decode_input", "rid": "r", "pos": 0, "layer": 0,
              "ssm": DIGEST, "conv": DIGEST, "token": 1, "token_pos": 0}  # fmt: skip
    path = tmp_path / "trace.jsonl"
    path.write_text(f"{json.dumps(HEADER)}\n{json.dumps(record)}\n")
    return str(path)


@pytest.mark.parametrize("unbuffered", [True, False], ids=["unbuffered", "buffered"])
@pytest.mark.parametrize(
    "args", [["--version"], ["demo", "--help"], ["trace-diff", "{trace}", "{trace}"]]
)
def test_a_closed_stdout_ends_the_verb_quietly(args, unbuffered, trace):
    proc = _run_into_a_closed_pipe([a.format(trace=trace) for a in args], unbuffered)
    assert (proc.returncode, proc.stderr) == (141, "")


@pytest.mark.parametrize("unbuffered", [True, False], ids=["unbuffered", "buffered"])
def test_smoke_into_a_closed_stdout_ends_quietly(unbuffered, series_tree):
    """The new user's case: ``gdn-parity smoke | head -1``."""
    proc = _run_into_a_closed_pipe(["smoke"], unbuffered)
    assert (proc.returncode, proc.stderr) == (141, "")


def _run_without(stream: str, args: list[str]) -> subprocess.CompletedProcess:
    """The verb started with ``stream`` ("stdout" or "stderr") closed: ``gdn-parity ... >&-``."""
    redirect = ">&-" if stream == "stdout" else "2>&-"
    return subprocess.run(
        ["bash", "-c", f'exec "$0" -m gdn_parity.cli "$@" {redirect}', sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize("args", [["--version"], ["demo", "--help"]])
def test_a_verb_started_without_stdout_ends_as_into_a_closed_pipe(args):
    """Before: Python's traceback (AttributeError: 'NoneType' object has no attribute
    'flush') and 1, the verdict's status."""
    proc = _run_without("stdout", args)
    assert (proc.returncode, proc.stderr) == (141, "")


def test_a_refusal_without_stdout_is_still_its_one_line_and_2(tmp_path):
    proc = _run_without("stdout", ["status", str(tmp_path / "missing")])
    assert proc.returncode == 2
    assert proc.stderr == f"gdn-parity status: error: {tmp_path / 'missing'} does not exist\n"


def test_a_refusal_without_stderr_does_not_print_to_stdout(tmp_path):
    """Before: with stderr closed, print(file=sys.stderr) printed the error to stdout."""
    proc = _run_without("stderr", ["status", str(tmp_path / "missing")])
    assert (proc.returncode, proc.stdout) == (2, "")
