"""Each Triton interpreter fix makes the interpreter agree with torch (and the GPU), and is needed.

With the fixes (installed by conftest) every probe of ``helpers.interpreter_probes``
agrees; in a fresh interpreter without them, each probe gets it wrong, so no fix
is dead weight. ``install`` refuses another Triton and names a missing hook.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from triton.runtime import interpreter as interp

from gdn_parity.sandbox import triton_interpreter_fixes
from helpers import interpreter_probes

TEST_DIR = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("fix", sorted(interpreter_probes.PROBES))
def test_with_the_fix_the_interpreter_agrees(fix):
    assert interpreter_probes.PROBES[fix]()


def test_builtins_are_patched_for_nested_calls_and_restored_after_the_launch():
    assert interpreter_probes.nested_calls_restored()


@pytest.fixture(scope="module")
def unfixed() -> dict[str, str]:
    """Every probe's outcome in a fresh interpreter with no fix installed."""
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(TEST_DIR))
    proc = subprocess.run(
        [sys.executable, "-m", "helpers.interpreter_probes"],
        capture_output=True,
        text=True,
        env=env,
        cwd=TEST_DIR,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("fix", sorted(interpreter_probes.PROBES))
def test_without_the_fix_the_interpreter_gets_it_wrong(unfixed, fix):
    assert unfixed[fix] != "agrees", f"fix {fix} is no longer needed: remove it"


def test_another_triton_version_is_refused():
    with pytest.raises(triton_interpreter_fixes.UnsupportedTriton, match="not 3.9.0"):
        triton_interpreter_fixes.check_triton("3.9.0")
    triton_interpreter_fixes.check_triton()  # the installed one is the supported one


def test_a_missing_hook_is_named(monkeypatch):
    monkeypatch.delattr(interp.InterpreterBuilder, "create_dot")
    with pytest.raises(triton_interpreter_fixes.UnsupportedTriton, match="create_dot"):
        triton_interpreter_fixes.check_triton()
