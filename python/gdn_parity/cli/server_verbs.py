"""The verb that runs real sglang servers: ``server-parity``. It needs no series."""

from __future__ import annotations

import argparse
import os

from gdn_parity.cli.options import path, writable_dirs
from gdn_parity.errors import GdnParityError


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

    plan = load_plan(args.plan, dict(args.set))
    out = args.out.absolute()
    if args.dry_run:
        for line in dry_run_lines(plan, out, os.environ):
            print(line)
        return 0
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise GdnParityError(
            f"--out {args.out} exists and is not an empty directory (its traces and logs "
            "would mix with this run's): name a new one"
        )
    writable_dirs((out, "--out"))
    python = check_paths(plan)
    results = run_plan(plan, python, out, os.environ)
    print("\n".join(summary(results)))
    status = results.exit_status()
    if status == EXIT_INCOMPLETE:
        raise GdnParityError(f"{results.problem()}; the results so far: {out / RESULTS_MD}")
    print(f"wrote {out / RESULTS_MD} and {out / RESULTS_JSON}")
    return status


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
    p.add_argument(
        "plan",
        type=path,
        help="the run plan (TOML: its keys in gdn_parity/realserver/plan.py; examples in "
        "benchmark/gpu/server/plans/)",
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
    p.set_defaults(func=cmd_server_parity)
