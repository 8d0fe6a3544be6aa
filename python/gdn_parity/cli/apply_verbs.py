"""Verbs of the apply targets: ``apply`` (and ``--revert``) and ``status``."""

from __future__ import annotations

import argparse
from pathlib import Path

from gdn_parity.apply.package import site_packages_sglang
from gdn_parity.apply.target import Target, open_target
from gdn_parity.errors import GdnParityError
from gdn_parity.queue.cache import cache_dir
from gdn_parity.queue.changes import FileChange, series_changes
from gdn_parity.queue.series import Series
from gdn_parity.queue.tree import materialise_tree


def _target(args: argparse.Namespace, series: Series) -> Target:
    if args.site_packages:
        return open_target(site_packages_sglang(), series)
    if args.target is None:
        raise GdnParityError("name a TARGET or pass --site-packages")
    return open_target(Path(args.target).resolve(), series)


def _changes(series: Series) -> list[FileChange]:
    """What the series does to each file, from a tree of its own (never a developer's)."""
    return series_changes(materialise_tree(series, cache_dir() / "apply-tree"))


def cmd_apply(args: argparse.Namespace, series: Series) -> int:
    target = _target(args, series)
    changes = _changes(series)
    done = target.revert(changes) if args.revert else target.apply(changes)
    print(done.summary)
    return 0


def cmd_status(args: argparse.Namespace, series: Series) -> int:
    target = _target(args, series)
    status = target.status(_changes(series))
    print(f"{target.path}: {status.state.value}")
    for line in status.details:
        print(f"  {line}")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    for name, func, text in (
        ("apply", cmd_apply, "apply the series to a checkout or an installed package"),
        ("status", cmd_status, "say whether a target has the series applied"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("target", nargs="?", help="sglang git checkout or sglang package directory")
        p.add_argument(
            "--site-packages", action="store_true", help="this Python's installed sglang"
        )
        if name == "apply":
            p.add_argument("--revert", action="store_true", help="restore the package's base bytes")
        p.set_defaults(func=func)
