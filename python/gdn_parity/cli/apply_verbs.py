"""Verbs of the apply targets: ``apply`` (and ``--revert``) and ``status``."""

from __future__ import annotations

import argparse

from gdn_parity.apply.choose import open_target
from gdn_parity.apply.package import python_sglang, site_packages_sglang
from gdn_parity.apply.target import Target
from gdn_parity.cli.options import path, program, series_of
from gdn_parity.queue.cache import cache_dir
from gdn_parity.queue.changes import FileChange, series_changes
from gdn_parity.queue.series import Series
from gdn_parity.queue.tree import materialise_tree


def _target(args: argparse.Namespace, series: Series) -> Target:
    """The checked target: a path, this Python's sglang, or another Python's sglang."""
    if args.site_packages:
        return open_target(site_packages_sglang(), series)
    if args.python:
        return open_target(python_sglang(args.python), series)
    return open_target(args.target.resolve(), series)


def _changes(series: Series) -> list[FileChange]:
    """What the series does to each file, from a tree of its own (never a developer's)."""
    return series_changes(materialise_tree(series, cache_dir() / "apply-tree"))


def cmd_apply(args: argparse.Namespace) -> int:
    series = series_of(args)
    target = _target(args, series)
    changes = _changes(series)
    done = target.revert(changes) if args.revert else target.apply(changes)
    print(done.summary)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    series = series_of(args)
    target = _target(args, series)
    status = target.status(_changes(series))
    print(f"{target.path}: {status.state.value}")
    if status.note:
        print(f"  {status.note}")
    for line in status.details:
        print(f"  {line}")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    for name, func, text in (
        ("apply", cmd_apply, "apply the series to a checkout or an installed package"),
        ("status", cmd_status, "say whether a target has the series applied"),
    ):
        p = sub.add_parser(
            name,
            help=text,
            description=text[0].upper() + text[1:] + ". The target is an sglang git "
            "checkout (its top directory), an installed sglang package directory, or the "
            "sglang that an interpreter imports (--python, --site-packages). "
            + (
                "Everything is checked before anything is written; all or nothing."
                if name == "apply"
                else "Prints unpatched, patched or modified; for modified, what the target holds "
                "and what to do, and the files: those that hold neither the base's nor the "
                "series' bytes, and those that hold the other version than the target's "
                "record says (an installed package's record of `gdn-parity apply`; a "
                "checkout has none, so the series' files there)."
            ),
        )
        where = p.add_mutually_exclusive_group(required=True)
        where.add_argument(
            "target",
            nargs="?",
            type=path,
            help="sglang git checkout or sglang package directory",
        )
        where.add_argument(
            "--python",
            metavar="PYTHON",
            type=program,
            help="the sglang that this interpreter imports, e.g. /path/to/venv/bin/python",
        )
        where.add_argument(
            "--site-packages",
            action="store_true",
            help="the sglang of the Python that runs gdn-parity",
        )
        if name == "apply":
            p.add_argument("--revert", action="store_true", help="restore the package's base bytes")
        p.set_defaults(func=func)
