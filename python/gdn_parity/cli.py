"""The ``gdn-parity`` command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gdn_parity.base import cache_dir
from gdn_parity.checkout import apply_to_checkout, checkout_state
from gdn_parity.errors import GdnParityError
from gdn_parity.export import check_series, export_series
from gdn_parity.git import is_git_repo
from gdn_parity.package import (
    apply_to_package,
    package_status,
    revert_package,
    site_packages_sglang,
)
from gdn_parity.plan import FileChange, series_changes
from gdn_parity.series import Series, load_series
from gdn_parity.smoke import smoke
from gdn_parity.tree import default_tree_dir, materialise_tree, record_tree


def _target(args: argparse.Namespace) -> Path:
    if args.site_packages:
        return site_packages_sglang()
    if args.target is None:
        raise GdnParityError("name a TARGET or pass --site-packages")
    return Path(args.target).resolve()


def _changes(series: Series) -> list[FileChange]:
    """What the series does to each file, from a tree of its own (never a developer's)."""
    return series_changes(materialise_tree(series, cache_dir() / "apply-tree"))


def cmd_tree(args: argparse.Namespace, series: Series) -> int:
    tree = materialise_tree(series, Path(args.dir) if args.dir else None)
    print(f"{tree}: sglang {series.version} + {len(series.patches)} patch(es)")
    return 0


def cmd_export(args: argparse.Namespace, series: Series) -> int:
    tree = Path(args.tree).resolve() if args.tree else default_tree_dir()
    names = export_series(series, tree, series.directory)
    record_tree(tree, load_series(series.directory))
    print(f"wrote {len(names)} patch(es) to {series.directory}")
    return 0


def cmd_check(args: argparse.Namespace, series: Series) -> int:
    problems = check_series(series)
    for problem in problems:
        print(problem)
    if problems:
        print("check FAILED: patches/ is not what `gdn-parity export` makes of it")
        return 1
    print(f"check ok: {len(series.patches)} patch(es) re-export byte for byte")
    return 0


def cmd_apply(args: argparse.Namespace, series: Series) -> int:
    target = _target(args)
    changes = _changes(series)
    if is_git_repo(target):
        if args.revert:
            raise GdnParityError("in a git checkout, revert with git (e.g. git reset)")
        count = apply_to_checkout(target, series, changes)
        print(f"applied {count} patch(es) to {target} as commits")
    elif args.revert:
        count = revert_package(target, changes)
        print(f"reverted {count} file(s) in {target}")
    else:
        count = apply_to_package(target, changes, series.version, series.digest())
        print(f"patched {count} file(s) in {target}")
    return 0


def cmd_status(args: argparse.Namespace, series: Series) -> int:
    target = _target(args)
    changes = _changes(series)
    if is_git_repo(target):
        state, details = checkout_state(target, changes)
    else:
        status = package_status(target, [c for c in changes if c.in_package])
        state, details = status.state, status.details
    print(f"{target}: {state}")
    for line in details:
        print(f"  {line}")
    return 0


def cmd_smoke(args: argparse.Namespace, series: Series) -> int:
    tree = materialise_tree(series, Path(args.dir) if args.dir else None)
    print(f"patched modules import from {tree}:")
    print(smoke(tree), end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gdn-parity", description=__doc__)
    parser.add_argument("--patches", help="the patches/ directory (default: this checkout's)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("tree", help="materialise base + series as a git work tree")
    p.add_argument("dir", nargs="?", help="where (default: the cache's tree/)")
    p.set_defaults(func=cmd_tree)

    p = sub.add_parser("export", help="regenerate patches/ from a tree's commits")
    p.add_argument("--tree", help="the tree (default: the cache's tree/)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("check", help="prove export(tree(patches)) == patches")
    p.set_defaults(func=cmd_check)

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

    p = sub.add_parser("smoke", help="import the patched modules from the tree")
    p.add_argument("dir", nargs="?", help="the tree (default: the cache's tree/)")
    p.set_defaults(func=cmd_smoke)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        series = load_series(Path(args.patches) if args.patches else None)
        return args.func(args, series)
    except GdnParityError as exc:
        print(f"gdn-parity: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
