"""``run_workers``: what an interrupted run leaves in the cache's logs; ``serve``: what a worker
frees."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
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
    stack: str = "rowwise"
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


# A worker (``pool.serve``) that builds the server stack, resizes its pools as ``cost`` and
# ``demo`` do, and reports whether the first pools were freed.
POOLS_WORKER = """
import gc, json, sys, weakref
from types import SimpleNamespace

from gdn_parity.drift.run.pool import serve


def load(text):
    return SimpleNamespace(**json.loads(text))


def run(job, progress):
    from gdn_parity.drift.model.stacks import StackSpec, build_stack

    model = build_stack(StackSpec("server", "tiny", "cpu", max_len=16, requests=1))
    first = weakref.ref(model.state)
    model.set_draft_tokens(3)
    gc.collect()
    freed = first() is None
    built = weakref.ref(model)
    del model  # as cost does before its next batch's model
    gc.collect()
    return SimpleNamespace(
        to_dict=lambda: {"first_pools_freed": freed, "model_freed": built() is None}
    )


sys.exit(serve(sys.argv[1:], load, run))
"""


@pytest.mark.slow  # a worker that imports sglang and builds the tiny stack (~30 s)
def test_a_worker_frees_the_first_pools_when_it_resizes_them(sglang_tree, tmp_path):
    """``set_draft_tokens`` drops the old pools before it makes the new ones, and ``cost``
    drops a model before the next batch's: in a worker both must then be gone. Before
    ``serve`` imported sglang's backend modules first, an import failure that sglang keeps
    (its traceback) held the frames that first imported them, inside the first pools'
    construction, and so the first pools and model: on an H100, cost at batch 64 ran out of
    memory in its first verify."""
    out = tmp_path / "result.json"
    job = tmp_path / "job.json"
    job.write_text(
        json.dumps({"tree": str(sglang_tree), "device": "cpu", "stack": "server", "out": str(out)})
    )
    script = tmp_path / "pools_worker.py"
    script.write_text(POOLS_WORKER)
    done = subprocess.run(
        [sys.executable, str(script), str(job)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(out.read_text()) == {"first_pools_freed": True, "model_freed": True}
