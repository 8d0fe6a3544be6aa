"""The ``gdn-parity`` command line: the parser of every verb, and the exit codes.

Exit status: 0 success, 1 "diverged / parity broken" (the verb says so), 2 a
``GdnParityError`` (bad input or a failure the message explains).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gdn_parity.cli import apply_verbs, debug_verbs, drift_verbs, queue_verbs
from gdn_parity.errors import GdnParityError
from gdn_parity.queue.series import load_series

EXIT_ERROR = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gdn-parity", description=__doc__.splitlines()[0])
    parser.add_argument("--patches", help="the patches/ directory (default: this checkout's)")
    sub = parser.add_subparsers(dest="command", required=True)
    queue_verbs.add_parsers(sub)
    apply_verbs.add_parsers(sub)
    drift_verbs.add_parsers(sub)
    debug_verbs.add_parsers(sub)
    queue_verbs.add_smoke_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        series = load_series(Path(args.patches) if args.patches else None)
        return args.func(args, series)
    except GdnParityError as exc:
        print(f"gdn-parity: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
