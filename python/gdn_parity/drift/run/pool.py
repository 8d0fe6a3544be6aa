"""Run jobs in worker processes, one sglang tree each, with one progress bar over all of them.

A worker is ``python -m MODULE JOB.json`` whose ``main`` is ``serve``: it reads
the job, makes its tree the package ``sglang``, reports progress on stdout as
``progress N`` lines and writes its result as JSON to ``job.out``. Ctrl-C stops
every worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from gdn_parity.errors import GdnParityError
from gdn_parity.logs import how_it_ended, log_path
from gdn_parity.queue.cache import cache_dir


class WorkerJob(Protocol):
    variant: str
    tree: str
    device: str
    stack: str  # "server": serve imports sglang's backend modules first
    out: str

    def to_json(self) -> str: ...


class _Result(Protocol):
    @classmethod
    def from_json(cls, text: str): ...


R = TypeVar("R", bound=_Result)


def serve(argv: list[str], load: Callable[[str], Any], run: Callable[[Any, Any], Any]) -> int:
    """A worker's main: ``load`` the job file's text, ``run(job, progress)`` with the job's
    tree as ``sglang``, write the result's ``to_dict()`` as JSON to ``job.out``."""
    job = load(Path(argv[0]).read_text())
    from gdn_parity.sandbox.sglang_tree import use_tree

    use_tree(Path(job.tree), job.device)
    import torch

    if job.stack == "server":
        from gdn_parity.drift.model.server.backends import import_sglang_modules

        # before any weights or pools exist: their first import holds the frames on the
        # stack (backends.SGLANG_MODULES); the row-wise stack imports none of them
        import_sglang_modules()

    torch.set_num_threads(1)  # workers run side by side

    def progress(n: int) -> None:
        print(f"progress {n}", flush=True)

    result = run(job, progress)
    Path(job.out).write_text(json.dumps(result.to_dict()))
    return 0


def _worker_env(device: str) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("SGLANG_CACHE_DIR", str(cache_dir() / "sglang-cache"))
    env["PYTHONWARNINGS"] = "ignore"
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    return env


class Bar:
    """One progress bar over every worker's units, drawn from the first unit on."""

    def __init__(self, desc: str, unit: str, total: int):
        self.lock = threading.Lock()
        self.desc, self.unit, self.total = desc, unit, total
        self.bar = None

    def update(self, n: int) -> None:
        from tqdm import tqdm

        with self.lock:
            if self.bar is None:
                self.bar = tqdm(
                    total=self.total,
                    unit=self.unit,
                    desc=self.desc,
                    file=sys.stderr,
                    mininterval=1.0,
                )
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@dataclass(frozen=True)
class _Failed:
    """A worker that failed: its job's place and variant, its last word and its log."""

    index: int
    variant: str
    why: str
    log: Path


def _failures(failed: list[_Failed]) -> str:
    """One line on the workers that failed; those that failed alike (a package that every
    worker imports) are named together, with their logs."""
    alike: dict[str, list[_Failed]] = {}
    for one in sorted(failed, key=lambda f: f.index):
        alike.setdefault(one.why, []).append(one)
    parts = []
    for why, group in alike.items():
        variants = ", ".join(f.variant for f in group)
        logs = ", ".join(str(f.log) for f in group)
        if len(group) == 1:
            parts.append(f"the worker of variant {variants} failed: {why} (its stderr: {logs})")
        else:
            parts.append(f"the workers of variants {variants} failed: {why} (their stderr: {logs})")
    return "; ".join(parts)


def run_workers(
    module: str,
    jobs: list[WorkerJob],
    parallel: int,
    device: str,
    bar: Bar,
    result: type[R],
) -> list[R]:
    """Each job's result, in order; ``parallel`` workers at a time.

    An exception in a job's thread (not a worker that fails: that is a ``GdnParityError``)
    stops every worker and is raised here, in the caller's thread, where the CLI turns it
    into its one line; left to the thread, threading printed its traceback on stderr.
    """
    results: dict[int, R] = {}
    failed: list[_Failed] = []
    raised: list[tuple[int, Exception]] = []
    semaphore = threading.Semaphore(parallel)
    procs: list[subprocess.Popen] = []
    stopped = threading.Event()  # by Ctrl-C, or by an exception in a thread

    finished = [threading.Event() for _ in jobs]

    def stop() -> None:
        stopped.set()
        for proc in procs:
            proc.kill()

    def run(index: int, job: WorkerJob) -> None:
        try:
            work(index, job)
        except Exception as exc:
            raised.append((index, exc))
            stop()
        finally:
            finished[index].set()

    def work(index: int, job: WorkerJob) -> None:
        with semaphore, tempfile.TemporaryDirectory() as tmp:
            if stopped.is_set():
                return
            job_file = Path(tmp) / "job.json"
            job_file.write_text(job.to_json())
            log = log_path(f"worker-{job.variant}")  # kept when the worker fails
            with (
                log.open("w") as err,
                subprocess.Popen(
                    [sys.executable, "-m", module, str(job_file)],
                    stdout=subprocess.PIPE,
                    stderr=err,
                    text=True,
                    env=_worker_env(device),
                ) as proc,  # on leaving: its stdout closed, and waited for
            ):
                procs.append(proc)
                if stopped.is_set():  # started while the others were being stopped
                    proc.kill()
                for line in proc.stdout:
                    if line.startswith("progress "):
                        bar.update(int(line.split()[1]))
            if proc.returncode != 0 and not stopped.is_set():
                why = how_it_ended(proc.returncode, log.read_text(errors="replace"))
                failed.append(_Failed(index, job.variant, why, log))
                return
            log.unlink()
            if not stopped.is_set():
                results[index] = result.from_json(Path(job.out).read_text())

    for i, j in enumerate(jobs):
        threading.Thread(target=run, args=(i, j)).start()
    # Waited for through events, not Thread.join: a join that Ctrl-C interrupts marks the
    # running thread as finished (CPython 3.11's threading, after bpo-45274), and a second
    # join then returns at once: the process exited under the threads, which left their
    # workers' logs behind.
    try:
        for done in finished:
            done.wait()
    except BaseException:  # Ctrl-C: stop the workers, wait for their threads, propagate
        stop()
        for done in finished:
            done.wait()
        # No error names a log of an interrupted run. A signal sent to the process group
        # (a terminal's Ctrl-C, kill -TERM -PGID) can end a worker before this process
        # sees it, so that its thread took the worker for a failure and kept its log.
        for failure in failed:
            failure.log.unlink(missing_ok=True)
        raise
    if raised:
        raise min(raised, key=lambda one: one[0])[1]
    if failed:
        raise GdnParityError(_failures(failed))
    return [results[i] for i in range(len(jobs))]
