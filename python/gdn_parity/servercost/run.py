"""Carry out a cost plan's starts on this machine and write what they measured.

Per start: the copy bandwidth (no server of the run up), the server, its limits, every
benchmark's batches, the stop. A server that does not come up is stopped, its log's last
lines go to stderr and to the results, its cells say so, and the run goes on with the next
start. Every server is stopped when the run ends, however it ends; ``results.json`` and
``results.md`` are written then too, with ``complete`` false when it was cut short. Given an
earlier run's results (``--resume``), the starts they hold in full are not run again: their
records and cells join this run's, in the plan's order (``resume.py``). ``results.json`` is
rewritten after every start, so a lease that ends mid-run leaves what it measured.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Mapping
from pathlib import Path

from gdn_parity.drift.model.config import SIZES
from gdn_parity.errors import GdnParityError
from gdn_parity.notes import note
from gdn_parity.realserver.capacity import over_capacity, server_capacity
from gdn_parity.realserver.launch import Launch
from gdn_parity.realserver.process import (
    ServerPool,
    ServerProcess,
    StartFailure,
    how_it_exited,
    log_tail,
)
from gdn_parity.realserver.results import Capacity, ServerRun
from gdn_parity.realserver.run import free_port
from gdn_parity.servercost.bandwidth import measure_bandwidth
from gdn_parity.servercost.floor import step_floor, window_context
from gdn_parity.servercost.launch import start_launch
from gdn_parity.servercost.measure import time_batch
from gdn_parity.servercost.plan import BenchmarkSpec, CostPlan
from gdn_parity.servercost.report import render
from gdn_parity.servercost.results import Cell, CostResults, Measured, StartResult
from gdn_parity.servercost.resume import KeptStart, kept_starts, other_machine, start_fingerprint
from gdn_parity.servercost.schedule import CostStart, schedule
from gdn_parity.servercost.table import table_rows
from gdn_parity.servercost.timing import repeat_cost, spread

RESULTS_JSON = "results.json"
RESULTS_MD = "results.md"


class _CostRun:
    def __init__(self, plan: CostPlan, python: Path, out: Path, environ: Mapping[str, str]):
        self.plan, self.python, self.out, self.environ = plan, python, out, environ
        self.results = CostResults(plan=str(plan.path), out=str(out))
        self.records: list[tuple[ServerProcess, ServerRun]] = []

    def event(self, text: str) -> None:
        self.results.events.append(text)
        note(text)

    def cells(self, start: CostStart) -> list[Cell]:
        server = self.plan.servers[start.server]
        benches = [b for b in self.plan.benchmarks if b.name in start.benchmarks]
        return [
            Cell(b.name, start.server, start.label, server.mode, server.gamma,
                 start.accept_length, batch)
            for b in benches
            for batch in b.batches
        ]  # fmt: skip

    def start(self, pool: ServerPool, start: CostStart) -> None:
        server = self.plan.servers[start.server]
        launch = start_launch(
            self.plan, str(self.python), start, self.out, free_port(), self.environ
        )
        record = StartResult(
            server=ServerRun(
                label=launch.label,
                mode=server.mode,
                gamma=server.gamma,
                argv=list(launch.argv),
                env=dict(launch.env),
                cwd=str(launch.cwd),
                log=str(launch.log),
                trace_dir=None,
                port=launch.port,
            ),
            name=start.server,
            accept_length=start.accept_length,
            fingerprint=start_fingerprint(self.plan, start, self.out, self.environ),
        )
        self.results.starts.append(record)
        try:
            record.bandwidth = measure_bandwidth(
                str(self.python), launch.env, self.out, self.environ
            )
            self.event(
                f"copy bandwidth before {launch.label}: "
                f"{record.bandwidth.bytes_per_s / 1e9:.0f} GB/s ({record.bandwidth.device})"
            )
        except GdnParityError as exc:
            record.bandwidth_problem = str(exc)
            self.event(f"no copy bandwidth before {launch.label} (no floor): {exc}")
        cells = self.cells(start)
        self.results.cells += cells
        self.event(f"start {launch.label} on port {launch.port}")
        _set_aside(launch.log)
        process = pool.spawn(launch)
        self.records.append((process, record.server))
        try:
            record.server.up_after_s = process.wait_healthy(server.start_timeout)
        except StartFailure as failure:
            record.server.failure, record.server.log_tail = str(failure), failure.tail
            for line in failure.tail:
                note(f"{launch.label} log: {line}")
            stopped = pool.stop(launch.label)
            self.event(f"failed {launch.label}: {failure}; stopped ({stopped.how})")
            for cell in cells:
                cell.not_run = f"the server did not start: {failure}"
            return
        self.event(f"up {launch.label} after {process.up_after_s:.1f} s")
        record.server.capacity = self.capacity(launch)
        for cell in cells:
            self.time_cell(process, launch, record, cell)
        if launch.label in pool.running:
            stopped = pool.stop(launch.label)
            self.event(f"stopped {launch.label} ({stopped.how})")

    def capacity(self, launch: Launch) -> Capacity | None:
        try:
            return server_capacity(launch.url)
        except GdnParityError as exc:
            self.event(f"{launch.label}: its limits are unknown, every batch is sent: {exc}")
            return None

    def time_cell(
        self, process: ServerProcess, launch: Launch, record: StartResult, cell: Cell
    ) -> None:
        bench = next(b for b in self.plan.benchmarks if b.name == cell.benchmark)
        width = 1 if cell.gamma is None else cell.gamma + 1
        if record.bandwidth is not None:
            cell.floor = step_floor(
                SIZES[self.plan.size],
                self.plan.ssm_dtype,
                self.plan.kv_cache_dtype,
                cell.batch,
                window_context(bench.prompt_len, bench.short_tokens, bench.long_tokens),
                width,
                cell.accept_length or 1,
                record.bandwidth.bytes_per_s,
            )
        if record.server.failure:
            cell.not_run = record.server.failure
            return
        if record.server.capacity is not None:
            tokens = bench.prompt_len + bench.long_tokens + width
            cell.not_run = over_capacity(record.server.capacity, cell.batch, tokens)
            if cell.not_run:
                self.event(f"skip {bench.name}, {cell.start}, batch {cell.batch}: {cell.not_run}")
                return
        try:
            self.measure(launch, bench, cell)
        except GdnParityError as exc:
            cell.not_run = str(exc)
            self.event(f"{bench.name}, {cell.start}, batch {cell.batch}: ERROR {exc}")
            self.died(process, record.server)

    def measure(self, launch: Launch, bench: BenchmarkSpec, cell: Cell) -> None:
        cell.repeats = time_batch(
            launch.url, bench, cell.batch, cell.gamma is not None, self.plan.request_timeout
        )
        costs = [repeat_cost(r) for r in cell.repeats]
        cell.measured = Measured(
            tpot_ms=spread([c.tpot_s * 1e3 for c in costs]),
            step_ms=spread([c.step_s * 1e3 for c in costs]),
            tokens_per_step=statistics.median(c.tokens_per_step for c in costs),
        )
        cell.retractions = sum(
            r.retractions
            for repeat in cell.repeats
            for run in (repeat.short, repeat.long)
            for r in run.requests
        )
        floor = "" if cell.floor is None else f", floor {cell.floor.step_ms:.2f} ms a step"
        self.event(
            f"{bench.name}, {cell.start}, batch {cell.batch}: TPOT "
            f"{cell.measured.tpot_ms.median:.2f} ms, step {cell.measured.step_ms.median:.2f} ms"
            f"{floor}"
        )

    def died(self, process: ServerProcess, record: ServerRun) -> None:
        """Record the server's exit, if it exited: its later cells are not run."""
        status = process.exit_status()
        if status is None:
            return
        record.failure = f"server {record.label} {how_it_exited(status)} while serving requests"
        record.log_tail = log_tail(process.launch.log)
        for line in record.log_tail:
            note(f"{record.label} log: {line}")

    def keep(self, kept: dict[str, KeptStart], starts: list[CostStart]) -> None:
        """Add the earlier starts that stand on this machine: one copy probe first, in the
        first start's environment; a start measured on another GPU or software runs again."""
        launch = start_launch(self.plan, str(self.python), starts[0], self.out, None, self.environ)
        try:
            here = measure_bandwidth(str(self.python), launch.env, self.out, self.environ)
        except GdnParityError as exc:
            self.event(f"the kept starts' GPU is not checked: {exc}")
            here = None
        for label, k in kept.items():
            why = None if here is None else other_machine(k.start, here)
            if why is not None:
                self.event(f"run again {label}: {why}")
                continue
            self.results.starts.append(k.start)
            self.results.cells += k.cells
        self.write()

    def kept_labels(self) -> set[str]:
        return {s.server.label for s in self.results.starts}

    def write(self) -> None:
        """``results.json`` and ``results.md`` as they stand, each replaced at once: a run cut
        short between two writes leaves the first whole."""
        order = {s.label: i for i, s in enumerate(schedule(self.plan))}
        self.results.starts.sort(key=lambda s: order[s.server.label])
        self.results.cells.sort(key=lambda c: order[c.start])
        self.results.rows = table_rows(self.plan, self.results.cells)
        for name, text in (
            (RESULTS_JSON, self.results.to_json()),
            (RESULTS_MD, render(self.results, self.plan)),
        ):
            part = self.out / f".{name}.part"
            part.write_text(text)
            os.replace(part, self.out / name)

    def finish(self) -> None:
        """What each stop did, the table's rows, and the results files."""
        for process, record in self.records:
            if process.stopped is not None:
                record.stopped = process.stopped.how
                record.leftover = list(process.stopped.leftover)
        self.write()


def _set_aside(log: Path) -> None:
    """An earlier attempt's log of this start (a resumed run's) becomes ``NAME.N.log``."""
    if not log.exists():
        return
    n = 1
    while (aside := log.with_name(f"{log.stem}.{n}{log.suffix}")).exists():
        n += 1
    log.rename(aside)


def run_cost_plan(
    plan: CostPlan,
    python: Path,
    out: Path,
    environ: Mapping[str, str],
    earlier: CostResults | None = None,
) -> CostResults:
    """Start, time and stop as ``schedule(plan)`` says, past the starts ``earlier`` holds in
    full; the results (also in ``out``)."""
    out.mkdir(parents=True, exist_ok=True)
    run = _CostRun(plan, python, out, environ)
    starts = schedule(plan)
    if earlier is not None:
        kept, dropped = kept_starts(earlier, plan, starts, out, environ)
        run.results.events += earlier.events
        for line in dropped:
            run.event(f"run again {line}")
        if kept:
            run.keep(kept, starts)
        run.event(
            f"resumed: {len(run.results.starts)} of {len(starts)} starts kept from the earlier run"
        )
    kept_labels = run.kept_labels()
    try:
        with ServerPool(plan.stop_grace, environ) as pool:
            for start in starts:
                if start.label in kept_labels:
                    continue
                run.start(pool, start)
                run.write()
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
