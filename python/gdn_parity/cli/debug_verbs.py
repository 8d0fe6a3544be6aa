"""Verbs that debug drift against real servers and their traces: ``trace-diff`` and ``repro``.

Neither needs the series.
"""

from __future__ import annotations

import argparse

from gdn_parity.cli.options import MAX_SECONDS, int_at_least, path, positive_int, positive_seconds
from gdn_parity.debug.issue35150 import MAX_NEW_TOKENS
from gdn_parity.errors import GdnParityError


def cmd_trace_diff(args: argparse.Namespace) -> int:
    from gdn_parity.debug.trace_diff import diff_traces, read_trace, report

    base, spec = read_trace(args.base), read_trace(args.spec)
    diff = diff_traces(base, spec, args.rid)
    if not diff.compared:
        raise GdnParityError("no state of SPEC has a counterpart in BASE: nothing was compared")
    for line in report(base, spec, diff, args.context):
        print(line)
    return 1 if diff.first is not None else 0


def cmd_repro(args: argparse.Namespace) -> int:
    from gdn_parity.debug.repro import load_input_ids, report, run_repro
    from gdn_parity.debug.sglang_client import check_base_url

    check_base_url(args.base_url)
    check_base_url(args.spec_url)
    ids = load_input_ids(args.input_ids)
    repro = run_repro(
        args.base_url, args.spec_url, ids, args.max_new_tokens, args.repeats, args.timeout, args.rid
    )
    lines, identical = report(repro, args.base_url, args.spec_url)
    print("\n".join(lines))
    return 0 if identical else 1


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "trace-diff",
        help="the first (position, layer, checkpoint) where two GDN state traces differ",
        description="Compare a speculative run's GDN state trace (SGLANG_GDN_STATE_TRACE or "
        "gdn-parity demo --trace; plain or gzip-compressed JSONL) with a Base run's. Exit "
        "status 1 when a state differs, 0 when every compared state is bitwise equal, 2 on "
        "bad input.",
    )
    p.add_argument("base", type=path, help="the Base run's trace (JSONL)")
    p.add_argument("spec", type=path, help="the speculative run's trace (JSONL)")
    p.add_argument("--rid", help="compare only this request id")
    p.add_argument(
        "--context", type=int_at_least(0), default=2, help="positions shown around it (2)"
    )
    p.set_defaults(func=cmd_trace_diff)

    p = sub.add_parser(
        "repro",
        help="replay sglang#35150's request against a Base and a speculative server",
        description="Send the issue's greedy request (24 input ids, 96 new tokens, "
        "ignore_eos) to both servers' /generate and compare the outputs. Exit status 1 "
        "when they differ, 2 when a server is unreachable or answers badly.",
    )
    p.add_argument("--base-url", required=True, help="the Base server, e.g. http://host:30000")
    p.add_argument("--spec-url", required=True, help="the speculative server")
    p.add_argument(
        "--input-ids", type=path, help="a file of input ids (JSON list or comma-separated)"
    )
    p.add_argument(
        "--max-new-tokens",
        type=positive_int,
        default=MAX_NEW_TOKENS,
        help=f"({MAX_NEW_TOKENS}, the issue's)",
    )
    p.add_argument(
        "--repeats", type=positive_int, default=1, help="send the request this many times (1)"
    )
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        default=600.0,
        help=f"seconds per request (600; at most {MAX_SECONDS})",
    )
    p.add_argument("--rid", default="gdn-parity-repro", help="request id prefix (same on both)")
    p.set_defaults(func=cmd_repro)
