"""gdn-parity: apply, prove and debug lossless speculative decoding on hybrid GDN models in SGLang.

Exit status: 0 success, 1 "diverged / parity broken" (the verb says so), 2 bad
input or a failure the one-line message explains (nothing was changed), 130
interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gdn_parity import __version__
from gdn_parity.cli import apply_verbs, debug_verbs, drift_verbs, queue_verbs
from gdn_parity.errors import GdnParityError

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error on one line (argparse's own exit status 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class VerbParser(Parser):
    """A verb's parser: an argument it does not know is its own usage error.

    argparse leaves a verb's unknown arguments to the top-level parser, whose
    message would point at ``gdn-parity --help`` instead of the verb's.
    """

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="gdn-parity",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1].replace("\n", " "),
    )
    parser.add_argument("--version", action="version", version=f"gdn-parity {__version__}")
    parser.add_argument(
        "--patches",
        help="the patches/ directory of the series (default: the series this install ships, "
        "or the checkout's patches/)",
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="VERB", parser_class=VerbParser
    )
    queue_verbs.add_parsers(sub)
    apply_verbs.add_parsers(sub)
    drift_verbs.add_parsers(sub)
    debug_verbs.add_parsers(sub)
    queue_verbs.add_smoke_parser(sub)
    return parser


def _error(message: str) -> int:
    print(f"gdn-parity: error: {message}", file=sys.stderr)
    return EXIT_ERROR


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except GdnParityError as exc:
        return _error(str(exc))
    except KeyboardInterrupt:
        print("gdn-parity: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        return _error(f"{where}{exc.strerror or exc}")
