"""The verbs that run real sglang servers: ``server-parity`` and ``server-cost``. They need no
series."""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING

from gdn_parity.cli.options import path, writable_dirs
from gdn_parity.errors import GdnParityError

if TYPE_CHECKING:
    from gdn_parity.realserver.plan import RunPlan


def assignment(text: str) -> tuple[str, str]:
    """An argparse type: ``NAME=VALUE``."""
    from gdn_parity.realserver.variables import parse_assignment

    try:
        return parse_assignment(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cmd_server_parity(args: argparse.Namespace) -> int:
    from gdn_parity.realserver.dryrun import dry_run_lines
    from gdn_parity.realserver.plan import check_paths, load_plan
    from gdn_parity.realserver.report import summary
    from gdn_parity.realserver.results import EXIT_INCOMPLETE
    from gdn_parity.realserver.run import RESULTS_JSON, RESULTS_MD, run_plan

    plan = _only(load_plan(args.plan, dict(args.set)), args.only)
    out = args.out.absolute()
    if args.dry_run:
        for line in dry_run_lines(plan, out, os.environ):
            print(line)
        return 0
    _fresh_out(out, args.out)
    python = check_paths(plan)
    results = run_plan(plan, python, out, os.environ)
    print("\n".join(summary(results)))
    status = results.exit_status()
    if status == EXIT_INCOMPLETE:
        raise GdnParityError(f"{results.problem()}; the results so far: {out / RESULTS_MD}")
    print(f"wrote {out / RESULTS_MD} and {out / RESULTS_JSON}")
    return status


def _only(plan: RunPlan, names: list[str] | None) -> RunPlan:
    """The plan with the comparisons ``names`` lists (``--only``), in its order; the
    servers none of them needs are not started."""
    if names is None:
        return plan
    known = [c.name for c in plan.comparisons]
    if not names:
        raise GdnParityError(f"--only names no comparison (the plan has {', '.join(known)})")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise GdnParityError(
            f"--only {unknown[0]}: the plan has no such comparison (it has {', '.join(known)})"
        )
    return dataclasses.replace(
        plan, comparisons=tuple(c for c in plan.comparisons if c.name in names)
    )


def _fresh_out(out: Path, given: Path) -> None:
    """Refuse an ``--out`` that holds anything (a run's logs would mix with another's)."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise GdnParityError(
            f"--out {given} exists and is not an empty directory (its traces and logs "
            "would mix with this run's): name a new one"
        )
    writable_dirs((out, "--out"))


def cmd_server_cost(args: argparse.Namespace) -> int:
    from gdn_parity.servercost.dryrun import dry_run_lines
    from gdn_parity.servercost.plan import check_cost_paths, load_cost_plan
    from gdn_parity.servercost.report import summary
    from gdn_parity.servercost.resume import kept_starts, read_earlier
    from gdn_parity.servercost.run import RESULTS_JSON, RESULTS_MD, run_cost_plan
    from gdn_parity.servercost.schedule import schedule

    plan = load_cost_plan(args.plan, dict(args.set), os.environ)
    out = args.out.absolute()
    earlier = read_earlier(out / RESULTS_JSON) if args.resume else None
    if args.dry_run:
        kept, dropped = (
            ({}, [])
            if earlier is None
            else kept_starts(earlier, plan, schedule(plan), out, os.environ)
        )
        for line in dry_run_lines(plan, out, os.environ, kept, dropped):
            print(line)
        return 0
    if earlier is None:
        _fresh_out(out, args.out)
    else:
        writable_dirs((out, "--out"))
    python = check_cost_paths(plan)
    results = run_cost_plan(plan, python, out, os.environ, earlier)
    print("\n".join(summary(results, plan)))
    problem = results.problem()
    if problem is not None:
        raise GdnParityError(f"{problem}; the results so far: {out / RESULTS_MD}")
    print(f"wrote {out / RESULTS_MD} and {out / RESULTS_JSON}")
    return 0


def _plan_arguments(p: argparse.ArgumentParser, keys: str) -> None:
    p.add_argument(
        "plan",
        type=path,
        help=f"the run plan (TOML: its keys in {keys}; examples in benchmark/gpu/server/plans/)",
    )
    p.add_argument(
        "--out", type=path, required=True, help="a new directory for the results and logs"
    )
    p.add_argument(
        "--set",
        type=assignment,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="the value of ${NAME} in the plan (before the environment's); repeatable",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the order of starts and stops and every command line and environment, "
        "and start nothing",
    )


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "server-parity",
        help="Base against DSpark on real sglang servers, as a plan says",
        description="Launch the plan's sglang servers (python -m sglang.launch_server) one "
        "at a time, send each comparison's batches concurrently to its Base and speculative "
        "server, compare every request's output tokens (and GDN states where both trace), "
        "and stop every server it started. Writes results.json, results.md and the server "
        "logs under --out. Exit status 0 when every comparison met its expectation, 1 when "
        "one did not, 2 on a bad plan or when a server did not come up or a request failed.",
    )
    _plan_arguments(p, "gdn_parity/realserver/plan.py")
    p.add_argument(
        "--only",
        type=lambda text: [name for name in text.split(",") if name],
        action="extend",
        metavar="NAME[,NAME...]",
        help="run only these comparisons of the plan, and start only the servers they need "
        "(a plan longer than one GPU lease)",
    )
    p.set_defaults(func=cmd_server_parity)
    p = sub.add_parser(
        "server-cost",
        help="time per output token and per step of real sglang servers, beside the floor",
        description="Launch the plan's sglang servers one at a time (a DSpark server once per "
        "simulated accept length), measure the GPU's copy bandwidth before each, send each "
        "benchmark's batches concurrently, and derive each batch's time per output token and "
        "per step from a long and a short run of the same prompts; beside each, the floor: "
        "the bytes a step must move over that bandwidth. Writes results.json, results.md and "
        "the server logs under --out. Exit status 0 when every batch was timed, 2 on a bad "
        "plan or when a server did not come up or a batch could not be timed.",
    )
    _plan_arguments(p, "gdn_parity/servercost/plan.py and gdn_parity/realserver/plan.py")
    p.add_argument(
        "--resume",
        action="store_true",
        help="go on from the results.json an earlier run left in --out: the starts it holds "
        "in full, for which the plan is unchanged, do not run again (a plan longer than one "
        "GPU lease)",
    )
    p.set_defaults(func=cmd_server_cost)
