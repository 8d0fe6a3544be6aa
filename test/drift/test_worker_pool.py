"""``run_workers``: what an interrupted run leaves in the cache's logs."""

from __future__ import annotations

import json
import signal
import threading
import time
from dataclasses import dataclass

import pytest

from gdn_parity.drift.run.pool import Bar, run_workers

# A worker ended by a signal before the parent sees one (as a signal sent to the process
# group can end it: SIGTERM, here by its own hand), or one that runs until it is stopped.
WORKER = """
import os, signal, sys, time
if "dies" in open(sys.argv[1]).read():
    os.kill(os.getpid(), signal.SIGTERM)
time.sleep(60)
"""


@dataclass
class _Job:
    variant: str
    tree: str = ""
    device: str = "cpu"
    out: str = ""

    def to_json(self) -> str:
        return json.dumps({"variant": self.variant})


def test_an_interrupted_run_keeps_no_log_of_a_worker_it_took_for_a_failure(
    scratch_cache, tmp_path, monkeypatch
):
    """Ctrl-C after one worker was ended by a signal (its thread takes it for a failure and
    keeps its log, for the error that would name it) and while another runs: no error names
    a log, so none is left. Before: the ended worker's log stayed in the cache."""
    (tmp_path / "signal_worker.py").write_text(WORKER)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    logs = scratch_cache / "logs"
    interrupted_after_the_failure = threading.Event()

    def ctrl_c_once_the_first_worker_has_failed() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(list(logs.glob("*.log"))) < 2:
            time.sleep(0.05)  # both workers started, each with its log
        time.sleep(2)  # the first one has ended, and its thread recorded the failure
        interrupted_after_the_failure.set()
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    # Ctrl-C raises KeyboardInterrupt, also where the test bed runs with SIGINT ignored
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=ctrl_c_once_the_first_worker_has_failed).start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            jobs = [_Job("dies"), _Job("runs")]
            run_workers("signal_worker", jobs, 2, "cpu", Bar("test", "step", 1), object)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert interrupted_after_the_failure.is_set()
    assert time.monotonic() - started < 30  # the running worker was stopped, not waited for
    assert list(logs.glob("*.log")) == []
