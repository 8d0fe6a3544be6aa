"""Verbs of the patch queue: ``tree``, ``export``, ``check`` and ``smoke``."""

from __future__ import annotations

import argparse
from pathlib import Path

from gdn_parity.queue.export import check_series, export_series
from gdn_parity.queue.series import Series, load_series
from gdn_parity.queue.tree import default_tree_dir, materialise_tree, record_tree
from gdn_parity.sandbox.smoke import smoke


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


def cmd_smoke(args: argparse.Namespace, series: Series) -> int:
    tree = materialise_tree(series, Path(args.dir) if args.dir else None)
    print(f"patched modules import from {tree}:")
    print(smoke(tree), end="")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tree", help="materialise base + series as a git work tree")
    p.add_argument("dir", nargs="?", help="where (default: the cache's tree/)")
    p.set_defaults(func=cmd_tree)

    p = sub.add_parser("export", help="regenerate patches/ from a tree's commits")
    p.add_argument("--tree", help="the tree (default: the cache's tree/)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("check", help="prove export(tree(patches)) == patches")
    p.set_defaults(func=cmd_check)


def add_smoke_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("smoke", help="import the patched modules from the tree")
    p.add_argument("dir", nargs="?", help="the tree (default: the cache's tree/)")
    p.set_defaults(func=cmd_smoke)
