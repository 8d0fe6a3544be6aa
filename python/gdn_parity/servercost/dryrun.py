"""``server-cost --dry-run``: every start's bandwidth probe, command line and environment,
the batches timed on it, and the run's totals; nothing is started. With ``--resume``, the
starts an earlier run holds in full are named as kept, and not counted."""

from __future__ import annotations

import shlex
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path

from gdn_parity.realserver.capacity import SERVER_INFO_PATH
from gdn_parity.realserver.dryrun import count
from gdn_parity.realserver.process import HEALTH_PATH
from gdn_parity.servercost.bandwidth import probe_argv
from gdn_parity.servercost.launch import start_launch
from gdn_parity.servercost.plan import BenchmarkSpec, CostPlan
from gdn_parity.servercost.schedule import schedule


def _runs(b: BenchmarkSpec) -> int:
    """Runs of a batch: the warm-up, then a short and a long per repeat."""
    return 1 + 2 * b.repeats


def dry_run_lines(
    plan: CostPlan,
    out: Path,
    environ: Mapping[str, str],
    kept: Collection[str] = (),
    dropped: Sequence[str] = (),
) -> Iterable[str]:
    """``kept``: the labels of an earlier run's starts that stand; ``dropped``: why each of
    its other starts runs again."""
    starts = schedule(plan)
    benches = {b.name: b for b in plan.benchmarks}
    resumed = f" ({len(kept)} kept from the earlier run)" if kept or dropped else ""
    yield (
        f"plan {plan.path}: {count(len(plan.benchmarks), 'benchmark')}, "
        f"{count(len(plan.servers), 'server')}, {count(len(starts), 'start')}{resumed}, one "
        f"server up at a time; size {plan.size}, SSM pool {plan.ssm_dtype}, KV cache "
        f"{plan.kv_cache_dtype}"
    )
    yield f"results: {out}/results.json, {out}/results.md; logs: {out}/logs/"
    yield "a dry run: nothing is started, and no path is checked"
    for line in dropped:
        yield f"runs again {line}"
    number = 0
    requests = prompt_tokens = new_tokens = 0
    for start in starts:
        server = plan.servers[start.server]
        launch = start_launch(plan, plan.python, start, out, None, environ)
        length = "" if start.accept_length is None else f", accept length {start.accept_length}"
        number += 1
        if start.label in kept:
            yield (
                f"{number}. kept {launch.label} ({server.describe()}{length}): the earlier run "
                "timed it (it runs again if that was another GPU or torch/triton)"
            )
            continue
        yield (
            f"{number}. start {launch.label} ({server.describe()}{length}): first the copy "
            f"bandwidth ({shlex.join(probe_argv(plan.python))}, in its environment), then up "
            f"when GET {HEALTH_PATH} answers 200 within {server.start_timeout:g} s; its limits "
            f"from GET {SERVER_INFO_PATH}"
        )
        for name, value in launch.env.items():
            yield f"   env {name}={shlex.quote(value)}"
        yield f"   cd {shlex.quote(str(launch.cwd))}"
        yield f"   {shlex.join(launch.argv)} > {shlex.quote(str(launch.log))} 2>&1"
        for name in start.benchmarks:
            b = benches[name]
            number += 1
            yield (
                f"{number}. time {b.name} on {launch.label}: batches "
                f"{', '.join(map(str, b.batches))}, each sent at once, {b.prompt_len} seeded ids "
                f"a request (seed {b.prompt_seed}, below {b.prompt_vocab}); a warm-up of "
                f"{b.short_tokens} new tokens, then {b.repeats} x ({b.short_tokens} and "
                f"{b.long_tokens} new tokens); greedy, ignore_eos, the cache flushed before each"
            )
            for batch in b.batches:
                requests += batch * _runs(b)
                prompt_tokens += batch * _runs(b) * b.prompt_len
                new_tokens += batch * (
                    b.short_tokens + b.repeats * (b.short_tokens + b.long_tokens)
                )
        number += 1
        yield (
            f"{number}. stop {launch.label}: SIGTERM to its process group, SIGKILL after "
            f"{plan.stop_grace:g} s"
        )
    yield (
        f"in all: {requests} requests, {prompt_tokens} prompt tokens prefilled, "
        f"{new_tokens} new tokens"
    )
