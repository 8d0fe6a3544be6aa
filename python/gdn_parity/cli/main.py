"""gdn-parity: apply, prove and debug lossless speculative decoding on hybrid GDN models in SGLang.

Exit status: 0 success, 1 "diverged / parity broken" (the verb says so), 2 bad
input (nothing was changed) or a failure the one-line message explains (naming a
log file where the detail matters), 70 internal error (an exception gdn-parity does not
expect: a bug or a broken install; the one-line message names the log file that holds the
traceback), 130 interrupted (Ctrl-C), 141 stdout closed before the output ended (as by
head in gdn-parity smoke | head -1), 143 terminated (SIGTERM; stopped as Ctrl-C stops it).
"""

from __future__ import annotations

import argparse
import errno
import io
import os
import signal
import sys
import tempfile
import threading
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import IO, NoReturn

from gdn_parity import __version__
from gdn_parity.cli import apply_verbs, debug_verbs, drift_verbs, queue_verbs, server_verbs
from gdn_parity.cli.options import path
from gdn_parity.errors import GdnParityError
from gdn_parity.logs import keep_log
from gdn_parity.notes import speak_for

EXIT_ERROR = 2
EXIT_INTERNAL = 70  # EX_SOFTWARE of sysexits.h: not 1, which is a verdict
EXIT_INTERRUPTED = 130
EXIT_STDOUT_CLOSED = 141  # 128 + SIGPIPE
EXIT_TERMINATED = 143  # 128 + SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised as the interrupt Ctrl-C raises, so that a verb stops its workers
    and leaves what an interrupted run leaves (before: the workers outlived it)."""


def _raise_terminated(signum: int, frame: object) -> NoReturn:
    """Raise ``Terminated`` once: a SIGTERM after it, while the verb stops, is ignored.

    Raised again, it would cut the verb's cleanup short, or at exit print an atexit callback's
    traceback. Ignored (not a handler of Python's, which exit resets to the default), it
    cannot kill the process either, so the exit status stays 143.
    """
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated


class UsageError(Exception):
    """A command line argparse refuses: the one line to print (argparse's exit status 2)."""


class UnknownArguments(UsageError):
    """Arguments no parser knows: the first thing to tell, before what is missing."""


class _VersionAsked(Exception):
    """``--version`` was parsed: the parser, which holds the whole command line, answers."""


class _Version(argparse.Action):
    """``--version``, alone on the command line. argparse's own action prints the version
    and exits as soon as it is parsed, so ``gdn-parity --version junk`` succeeded."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(
            option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, help=help
        )

    def __call__(self, *args: object, **kwargs: object) -> NoReturn:
        raise _VersionAsked


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error on one line, raised for ``main`` to print.

    When arguments are missing and an argument is also unknown, the unknown one is
    the error: ``gdn-parity status --bogus`` is a typo, not a call without a target.
    """

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        raise UsageError(self._line(message))

    def _line(self, message: str) -> str:
        return f"{self.prog}: error: {message} (see {self.prog} --help)"

    def _print_message(self, message: str, file: IO[str] | None = None) -> None:
        """As argparse's, without its silence on OSError: ``--help`` into a closed pipe is
        a closed stdout, as any verb's output is (``main``)."""
        if message:
            (file or sys.stderr).write(message)

    def _version(self, args: list[str]) -> NoReturn:
        """Print the version and exit; refuse a command line that holds anything else, but
        ``--help``: one rule in either order, ``--help`` answers (as beside any argument)."""
        others = list(args)  # less the option itself, as typed (argparse takes "--vers")
        others.remove(next(a for a in args if len(a) > 2 and "--version".startswith(a)))
        if _asks_for_help(others):
            super().parse_known_args(others)  # prints the help asked for, and exits
        if others:
            raise UsageError(
                self._line(f"argument --version: takes no other arguments: {' '.join(others)}")
            )
        self._print_message(f"gdn-parity {__version__}\n", sys.stdout)
        self.exit()

    def refuse_unknown(self, extras: list[str]) -> NoReturn:
        raise UnknownArguments(self._line(f"unrecognized arguments: {' '.join(extras)}"))

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            self.refuse_unknown(extras)
        return namespace

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        try:
            return super().parse_known_args(args, namespace)
        except _VersionAsked:
            self._version(sys.argv[1:] if args is None else list(args))
        except UnknownArguments:
            raise
        except UsageError as first:
            # Parse again with nothing required: an unknown argument then shows up on its
            # own (a verb's parser refuses it; the top level's comes back as an extra).
            with _nothing_required(self):
                try:
                    _, extras = super().parse_known_args(args, argparse.Namespace())
                except UnknownArguments:
                    raise
                except UsageError:
                    raise first from None
            if extras:
                self.refuse_unknown(extras)
            raise


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
            self.refuse_unknown(extras)
        return namespace, extras


def _asks_for_help(args: list[str]) -> bool:
    """``args`` hold ``-h`` or ``--help`` (or its abbreviation) before any ``--``."""
    options = args[: args.index("--")] if "--" in args else args
    return any(a == "-h" or (len(a) > 3 and "--help".startswith(a)) for a in options)


@contextmanager
def _nothing_required(parser: argparse.ArgumentParser) -> Iterator[None]:
    """Within: no argument, group or verb of ``parser`` or of its verbs is required."""
    saved: list[tuple[object, bool]] = []

    def relax(p: argparse.ArgumentParser) -> None:
        for item in [*p._actions, *p._mutually_exclusive_groups]:
            saved.append((item, item.required))
            item.required = False
            if isinstance(item, argparse._SubParsersAction):
                for verb in item.choices.values():
                    relax(verb)

    relax(parser)
    try:
        yield
    finally:
        for item, required in saved:
            item.required = required  # type: ignore[attr-defined]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="gdn-parity",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1].replace("\n", " "),
    )
    parser.add_argument("--version", action=_Version, help="show the version and exit")
    parser.add_argument(
        "--patches",
        type=path,
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
    server_verbs.add_parsers(sub)
    queue_verbs.add_smoke_parser(sub)
    return parser


def _error(prog: str, message: str) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr)
    return EXIT_ERROR


def _internal_error(prog: str, exc: Exception) -> int:
    """An exception no verb expects: one line that says what it was and where its traceback is."""
    what = traceback.format_exception_only(exc)[-1].strip()
    where = _keep_traceback("".join(traceback.format_exception(exc)))
    print(
        f"{prog}: internal error: {what} (a bug in gdn-parity or a broken install; "
        f"the traceback: {where})",
        file=sys.stderr,
    )
    return EXIT_INTERNAL


def _keep_traceback(text: str) -> str:
    """Where ``text`` was written: the cache's ``logs/``, else the temporary directory (the
    cache may be what failed), else stderr (where it is printed, above the error's line)."""
    try:
        return str(keep_log("internal-error", text))
    except Exception:
        pass
    try:
        handle, name = tempfile.mkstemp(prefix="gdn-parity-internal-error-", suffix=".log")
        with open(handle, "w") as file:
            file.write(text)
        return name
    except OSError:
        sys.stderr.write(text)
        return "above"


def _stdout_closed() -> int:
    """The reader of stdout has gone (``gdn-parity smoke | head -1``): not an error to report.

    What the verb had left to print goes nowhere (stdout becomes /dev/null, so the flush
    at exit cannot fail again), and the status is the shell's for a process that SIGPIPE
    ended, 128 + 13: the output was cut short, so not 0, and neither a verdict (1) nor a
    refusal (2). Python ignores SIGPIPE, so the write raised BrokenPipeError instead.
    """
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_STDOUT_CLOSED


class _ClosedStdout(io.TextIOWrapper):
    """stdout when the process started without one (``gdn-parity ... >&-``): a write fails
    as a write into a pipe whose reader has gone, so the verb ends as it does then (141)."""

    def write(self, text: str) -> int:
        if text:
            raise BrokenPipeError(errno.EPIPE, "stdout is closed")
        return 0


def _open_missing_streams() -> None:
    """Give a process started with stdout or stderr closed a stream there, on /dev/null.

    Python sets such a stream to None. Left so, ``print(file=sys.stderr)`` would print to
    stdout, a flush would raise AttributeError, and the next file the process opens would
    take the free descriptor, so a child's output would land in that file. Without stdout,
    output is cut short (141 once a verb writes to it); without stderr, errors go unseen.
    """
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is None:
            os.dup2(os.open(os.devnull, os.O_WRONLY), fd)
            stream = io.FileIO(fd, "w", closefd=False)
            setattr(sys, name, (_ClosedStdout if fd == 1 else io.TextIOWrapper)(stream))


def main(argv: list[str] | None = None) -> int:
    _open_missing_streams()
    if threading.current_thread() is threading.main_thread():  # where handlers can be set
        signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        try:
            status = _run(argv)
        except SystemExit as done:  # --help and --version: argparse printed, and exits
            status = int(done.code or 0)
        sys.stdout.flush()  # here, where a closed stdout is caught, not at exit
        return status
    except BrokenPipeError:  # the verbs turn their sockets' errors into GdnParityError
        return _stdout_closed()


def _run(argv: list[str] | None) -> int:
    prog = "gdn-parity"  # the verb's, once the command line is parsed
    try:
        args = build_parser().parse_args(argv)
        prog = f"gdn-parity {args.command}"
        speak_for(prog)
        return args.func(args)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return EXIT_ERROR
    except GdnParityError as exc:
        return _error(prog, str(exc))
    except Terminated:
        print(f"{prog}: terminated", file=sys.stderr)
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        raise
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        return _error(prog, f"{where}{exc.strerror or exc}")
    except Exception as exc:
        return _internal_error(prog, exc)
