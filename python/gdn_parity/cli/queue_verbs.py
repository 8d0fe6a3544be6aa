"""Verbs of the patch queue: ``tree``, ``export``, ``check`` and ``smoke``."""

from __future__ import annotations

import argparse
from pathlib import Path

from gdn_parity.cli.options import series_of
from gdn_parity.errors import GdnParityError
from gdn_parity.queue.export import check_series, export_series
from gdn_parity.queue.series import load_series, packaged_patches_dir
from gdn_parity.queue.tree import default_tree_dir, materialise_tree, record_tree
from gdn_parity.sandbox.smoke import smoke


def cmd_tree(args: argparse.Namespace) -> int:
    series = series_of(args)
    tree = materialise_tree(series, Path(args.dir) if args.dir else None)
    print(f"{tree}: sglang {series.version} + {len(series.patches)} patch(es)")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    series = series_of(args)
    if series.directory == packaged_patches_dir().resolve():
        raise GdnParityError(
            f"the series in use is the copy this install ships ({series.directory}); export "
            "writes a checkout's patches/: pass --patches /path/to/gdn-parity/patches"
        )
    tree = Path(args.tree).resolve() if args.tree else default_tree_dir()
    names = export_series(series, tree, series.directory)
    record_tree(tree, load_series(series.directory))
    print(f"wrote {len(names)} patch(es) to {series.directory}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    series = series_of(args)
    problems = check_series(series)
    for problem in problems:
        print(problem)
    if problems:
        print("check FAILED: patches/ is not what `gdn-parity export` makes of it")
        return 1
    print(f"check ok: {len(series.patches)} patch(es) re-export byte for byte")
    return 0


def cmd_smoke(args: argparse.Namespace) -> int:
    tree = materialise_tree(series_of(args), Path(args.dir) if args.dir else None)
    print(f"patched modules import from {tree}:")
    print(smoke(tree), end="")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tree",
        help="materialise base + series as a git work tree",
        description="A git work tree: branch 'base' is sglang's pinned release laid out as "
        "upstream's python/sglang/ (usable as a v0.5.23 checkout for git am), and the "
        "current branch adds one commit per patch.",
    )
    p.add_argument("dir", nargs="?", help="where (default: the cache's tree/)")
    p.set_defaults(func=cmd_tree)

    p = sub.add_parser("export", help="regenerate patches/ from a tree's commits")
    p.add_argument("--tree", help="the tree (default: the cache's tree/)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("check", help="prove export(tree(patches)) == patches")
    p.set_defaults(func=cmd_check)


def add_smoke_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "smoke",
        help="import the patched modules from the tree",
        description="Materialise the tree if needed and import every module the series "
        "patches from it, in a fresh interpreter: a quick check that the series applies "
        "and the patched sglang imports (no model, no GPU).",
    )
    p.add_argument("dir", nargs="?", help="the tree (default: the cache's tree/)")
    p.set_defaults(func=cmd_smoke)
