"""Nothing the runner starts outlives it: not after SIGTERM or SIGINT to the runner while a
request is in flight, not after an exception, not after SIGKILL (which no handler sees)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from gdn_parity.realserver import run as run_module
from gdn_parity.realserver.plan import check_paths, load_plan
from gdn_parity.realserver.run import run_plan
from helpers.cli import sigint_as_a_terminal


def _held_plan(rig):
    """A comparison whose speculative server holds its one request for a minute."""
    servers = {
        "base": rig.server(name="base"),
        "spec": rig.server("dspark", 1, name="spec", env={"FAKE_SGLANG_HOLD": "60"}),
    }
    comparison = {"base": "base", "spec": "spec", "batches": [1], "max_new_tokens": 4,
                  "expect": "identical"}  # fmt: skip
    return rig.plan(servers, {"c": comparison})


def _start_and_wait_for_the_held_request(rig) -> subprocess.Popen:
    runner = subprocess.Popen(
        rig.args(_held_plan(rig)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=rig.env(),
        preexec_fn=sigint_as_a_terminal,
    )
    deadline = time.monotonic() + 60
    while not any(e["server"] == "spec" for e in rig.events("request")):
        assert runner.poll() is None, runner.communicate()
        assert time.monotonic() < deadline, "the speculative server got no request"
        time.sleep(0.05)
    return runner


@pytest.mark.parametrize(
    "signum,status,said",
    [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")],
)
def test_a_signal_to_the_runner_stops_every_server(rig, signum, status, said):
    runner = _start_and_wait_for_the_held_request(rig)
    assert [p for p in rig.pids() if os.path.exists(f"/proc/{p}")], "no fake is running"
    runner.send_signal(signum)
    _, stderr = runner.communicate(timeout=60)
    assert runner.returncode == status, stderr
    assert stderr.splitlines()[-1] == f"gdn-parity server-parity: {said}"
    assert rig.wait_gone(0) == []
    results = json.loads((rig.out / "results.json").read_text())
    assert results["complete"] is False
    assert results["interrupted"] == "interrupted (SIGINT or SIGTERM)"
    assert [s["stopped"] for s in results["servers"]] == ["SIGTERM", "SIGTERM"]


def test_sigkill_to_the_runner_takes_every_server_along(rig):
    runner = _start_and_wait_for_the_held_request(rig)
    runner.kill()
    runner.communicate(timeout=60)
    assert rig.wait_gone(15) == []


def test_an_exception_in_the_runner_stops_every_server(rig, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the comparison")

    monkeypatch.setattr(run_module, "run_batch", broken)
    monkeypatch.setenv("FAKE_SGLANG_RECORD", str(rig.records))
    plan = load_plan(_held_plan(rig), {"TREE": str(rig.tree), "PYTHON": sys.executable})
    with pytest.raises(RuntimeError, match="a bug in the comparison"):
        run_plan(plan, check_paths(plan), rig.out, os.environ)
    assert len(rig.events("start")) == 2
    assert rig.wait_gone(0) == []
    results = json.loads((rig.out / "results.json").read_text())
    assert results["interrupted"] == "RuntimeError: a bug in the comparison"
    assert [s["stopped"] for s in results["servers"]] == ["SIGTERM", "SIGTERM"]
