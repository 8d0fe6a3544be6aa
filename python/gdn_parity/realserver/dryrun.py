"""``--dry-run``: the schedule, every command line and environment, and nothing started."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path

from gdn_parity.debug.issue35150 import INPUT_IDS
from gdn_parity.realserver.compare import rid
from gdn_parity.realserver.launch import launch_for
from gdn_parity.realserver.plan import RunPlan, pair_label
from gdn_parity.realserver.process import HEALTH_PATH
from gdn_parity.realserver.schedule import Compare, Start, schedule


def count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def dry_run_lines(plan: RunPlan, out: Path, environ: Mapping[str, str]) -> Iterable[str]:
    steps = schedule(plan)
    starts = sum(isinstance(s, Start) for s in steps)
    yield (
        f"plan {plan.path}: {count(len(plan.comparisons), 'comparison')}, "
        f"{count(len(plan.servers), 'server')}, {count(starts, 'start')}, one at a time, "
        "at most two servers up"
    )
    yield f"results: {out}/results.json, {out}/results.md; logs: {out}/logs/"
    yield "a dry run: nothing is started, and no path is checked"
    for number, step in enumerate(steps, 1):
        if isinstance(step, Start):
            server = plan.servers[step.server]
            launch = launch_for(plan, plan.python, server, step.instance, out, None, environ)
            yield (
                f"{number}. start {launch.label} ({server.describe()}): up when GET "
                f"{HEALTH_PATH} answers 200 within {server.start_timeout:g} s"
            )
            for name, value in launch.env.items():
                yield f"   env {name}={shlex.quote(value)}"
            yield f"   cd {shlex.quote(str(launch.cwd))}"
            yield f"   {shlex.join(launch.argv)} > {shlex.quote(str(launch.log))} 2>&1"
        elif isinstance(step, Compare):
            c = step.comparison
            yield (
                f"{number}. compare {c.name}: {pair_label(c.base, c.spec, c.reference)}, "
                "batch sizes "
                f"{', '.join(map(str, c.batches))}; {c.max_new_tokens} new tokens a request, "
                f"greedy, ignore_eos; expect {c.expect}"
            )
            yield (
                f"   request 0: sglang#35150's {len(INPUT_IDS)} ids; requests 1..: "
                f"{c.prompt_len} seeded ids below {c.prompt_vocab} (seed {c.prompt_seed}); "
                f"rids {rid(c.name, c.batches[0], 0)}, ..."
            )
            if plan.servers[c.base].trace and plan.servers[c.spec].trace:
                yield "   then each rid's GDN states, speculative against Base"
        else:
            yield (
                f"{number}. stop {step.server}: SIGTERM to its process group, SIGKILL after "
                f"{plan.stop_grace:g} s"
            )
