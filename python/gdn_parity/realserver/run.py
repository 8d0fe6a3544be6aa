"""Carry out a plan's schedule on this machine and write what it found.

A server that does not come up is stopped, its log's last lines go to stderr and to the
results, and the run goes on with the comparisons that do not need it (a speculative
server whose every partner is down is not started). Every server is stopped when the run
ends, however it ends; ``results.json`` and ``results.md`` are written then too, with
``complete`` false when it was cut short.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Mapping
from pathlib import Path

from gdn_parity.errors import GdnParityError
from gdn_parity.notes import note
from gdn_parity.realserver.capacity import at_once, server_capacity
from gdn_parity.realserver.compare import run_batch
from gdn_parity.realserver.launch import HOST, launch_for
from gdn_parity.realserver.plan import ComparisonSpec, RunPlan
from gdn_parity.realserver.process import (
    ServerPool,
    ServerProcess,
    StartFailure,
    how_it_exited,
    log_tail,
)
from gdn_parity.realserver.report import render
from gdn_parity.realserver.results import ComparisonResult, RunResults, ServerRun
from gdn_parity.realserver.schedule import Compare, Start, Step, Stop, schedule

RESULTS_JSON = "results.json"
RESULTS_MD = "results.md"


def free_port() -> int:
    """A port no one listens on now (the server binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def _partners_up_before(steps: list[Step], index: int) -> set[str]:
    """The servers the one ``steps[index]`` starts is compared with, before it stops, that
    are not started after it: those that must be up already (a speculative server's Base)."""
    server = steps[index].server  # type: ignore[union-attr]
    partners: set[str] = set()
    later: set[str] = set()
    for step in steps[index + 1 :]:
        if isinstance(step, Stop) and step.server == server:
            break
        if isinstance(step, Start):
            later.add(step.server)
        if isinstance(step, Compare) and server in (step.comparison.base, step.comparison.spec):
            c = step.comparison
            partners.add(c.spec if c.base == server else c.base)
    return partners - later - {server}


class _Run:
    def __init__(self, plan: RunPlan, python: Path, out: Path, environ: Mapping[str, str]):
        self.plan, self.python, self.out, self.environ = plan, python, out, environ
        self.results = RunResults(plan=str(plan.path), out=str(out))
        self.latest: dict[str, tuple[ServerProcess, ServerRun]] = {}  # by server name
        self.up: set[str] = set()  # the servers that answer now
        self.down: dict[str, str] = {}  # server name -> why it is not up
        self.records: list[tuple[ServerProcess, ServerRun]] = []

    def event(self, text: str) -> None:
        self.results.events.append(text)
        note(text)

    def start(self, pool: ServerPool, step: Start, partners: set[str]) -> None:
        server = self.plan.servers[step.server]
        if partners and not partners & self.up:
            self.down[server.name] = f"not started: {', '.join(sorted(partners))} not up"
            self.event(f"skip {server.name}: {', '.join(sorted(partners))} not up")
            return
        launch = launch_for(
            self.plan, str(self.python), server, step.instance, self.out, free_port(), self.environ
        )
        record = ServerRun(
            label=launch.label,
            mode=server.mode,
            gamma=server.gamma,
            argv=list(launch.argv),
            env=dict(launch.env),
            cwd=str(launch.cwd),
            log=str(launch.log),
            trace_dir=None if launch.trace_dir is None else str(launch.trace_dir),
            port=launch.port,
        )
        self.results.servers.append(record)
        self.event(f"start {launch.label} ({server.describe()}) on port {launch.port}")
        process = pool.spawn(launch)
        self.records.append((process, record))
        self.latest[server.name] = (process, record)
        try:
            record.up_after_s = process.wait_healthy(server.start_timeout)
        except StartFailure as failure:
            record.failure, record.log_tail = str(failure), failure.tail
            for line in failure.tail:
                note(f"{launch.label} log: {line}")
            stopped = pool.stop(launch.label)
            self.event(f"failed {launch.label}: {failure}; stopped ({stopped.how})")
            self.down[server.name] = str(failure)
            return
        self.up.add(server.name)
        self.down.pop(server.name, None)
        self.event(f"up {launch.label} after {process.up_after_s:.1f} s")
        try:
            record.capacity = server_capacity(launch.url)
        except GdnParityError as exc:
            self.event(f"{launch.label}: how many requests it runs at once is unknown: {exc}")

    def stop(self, pool: ServerPool, step: Stop) -> None:
        self.up.discard(step.server)
        if step.server not in self.latest:
            return
        _, record = self.latest[step.server]
        if record.label in pool.running:
            stopped = pool.stop(record.label)
            self.event(f"stopped {record.label} ({stopped.how})")

    def compare(self, c: ComparisonSpec) -> None:
        result = ComparisonResult(
            name=c.name,
            base=self.latest[c.base][1].label if c.base in self.up else c.base,
            spec=self.latest[c.spec][1].label if c.spec in self.up else c.spec,
            expect=c.expect,
            max_new_tokens=c.max_new_tokens,
            prompt_len=c.prompt_len,
            prompt_seed=c.prompt_seed,
            prompt_vocab=c.prompt_vocab,
            reference=c.reference,
        )
        self.results.comparisons.append(result)
        try:
            self._run_batches(c, result)
        finally:
            result.judge()

    def _run_batches(self, c: ComparisonSpec, result: ComparisonResult) -> None:
        down = [name for name in (c.base, c.spec) if name not in self.up]
        if down:
            result.not_run = "; ".join(f"server {n}: {self.down.get(n, 'not up')}" for n in down)
            self.event(f"skip {c.name}: {result.not_run}")
            return
        (base, base_run), (spec, spec_run) = self.latest[c.base], self.latest[c.spec]
        traces = None
        if base_run.trace_dir and spec_run.trace_dir:
            traces = (Path(base_run.trace_dir), Path(spec_run.trace_dir))
        for batch in c.batches:
            tokens = c.prompt_len + c.max_new_tokens
            # Alone, the base side runs one request at a time: only the batch's server counts.
            batched = [spec_run] if c.reference == "alone" else [base_run, spec_run]
            running, limited_by = at_once(batch, batched, tokens)
            if limited_by:
                self.event(
                    f"{c.name}, batch {batch}: {limited_by} can run at most {running} requests "
                    "at once; the rest queue"
                )
            b = run_batch(
                c, batch, base.launch.url, spec.launch.url, self.plan.request_timeout, traces
            )
            b = dataclasses.replace(b, at_once=running, limited_by=limited_by)
            result.batches.append(b)
            verdict = "met" if b.met else ("ERROR" if b.error else "MISSED")
            self.event(
                f"{c.name}, batch {batch}: {b.identical}/{batch} identical, states "
                f"{b.states}; expected {c.expect}: {verdict}" + (f" ({b.error})" if b.error else "")
            )
            servers = {id(p): (p, r) for p, r in ((base, base_run), (spec, spec_run))}
            if b.error and any([self._died(p, r) for p, r in servers.values()]):
                result.not_run = f"a server exited during batch {batch}: the rest did not run"
                return

    def _died(self, process: ServerProcess, record: ServerRun) -> bool:
        status = process.exit_status()
        if status is None:
            return False
        name = process.launch.server.name
        record.failure = f"server {record.label} {how_it_exited(status)} while serving requests"
        record.log_tail = log_tail(process.launch.log)
        for line in record.log_tail:
            note(f"{record.label} log: {line}")
        self.up.discard(name)
        self.down[name] = record.failure
        return True

    def finish(self) -> None:
        """What each stop did, and the results files."""
        for process, record in self.records:
            if process.stopped is not None:
                record.stopped = process.stopped.how
                record.leftover = list(process.stopped.leftover)
        (self.out / RESULTS_JSON).write_text(self.results.to_json())
        (self.out / RESULTS_MD).write_text(render(self.results))


def run_plan(plan: RunPlan, python: Path, out: Path, environ: Mapping[str, str]) -> RunResults:
    """Start, compare and stop as ``schedule(plan)`` says; the results (also in ``out``)."""
    out.mkdir(parents=True, exist_ok=True)
    run = _Run(plan, python, out, environ)
    steps = schedule(plan)
    try:
        with ServerPool(plan.stop_grace, environ) as pool:
            for index, step in enumerate(steps):
                if isinstance(step, Start):
                    run.start(pool, step, _partners_up_before(steps, index))
                elif isinstance(step, Compare):
                    run.compare(step.comparison)
                else:
                    run.stop(pool, step)
        run.results.complete = True
    except KeyboardInterrupt:
        run.results.interrupted = "interrupted (SIGINT or SIGTERM)"
        raise
    except BaseException as exc:
        run.results.interrupted = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        run.finish()
    return run.results
