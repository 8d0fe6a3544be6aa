"""Verbs of the patch queue: ``tree``, ``export``, ``check`` and ``smoke``."""

from __future__ import annotations

import argparse

from gdn_parity.cli.options import path, series_of
from gdn_parity.errors import GdnParityError
from gdn_parity.queue.export import check_series, export_series
from gdn_parity.queue.git import is_git_repo
from gdn_parity.queue.series import load_series, packaged_patches_dir
from gdn_parity.queue.tree import (
    default_tree_dir,
    holds_nothing,
    made_by_gdn_parity,
    materialise_tree,
    record_tree,
)
from gdn_parity.sandbox.smoke import smoke


def cmd_tree(args: argparse.Namespace) -> int:
    series = series_of(args)
    tree = materialise_tree(series, args.dir)
    print(f"{tree}: sglang {series.version} + {len(series.patches)} patch(es)")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    series = series_of(args)
    if series.directory == packaged_patches_dir().resolve():
        raise GdnParityError(
            f"the series in use is the copy this install ships ({series.directory}); export "
            "writes a checkout's patches/: pass --patches /path/to/gdn-parity/patches"
        )
    tree = (args.tree or default_tree_dir()).resolve()
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
    series = series_of(args)
    if args.dir is not None and not is_git_repo(args.dir):
        where = args.dir if holds_nothing(args.dir) else "NEWDIR"
        raise GdnParityError(
            f"{args.dir} is not a tree: make one with `gdn-parity tree {where}`, or leave "
            "DIR out to use the cache's tree"
        )
    if args.dir is not None and not made_by_gdn_parity(args.dir):
        raise GdnParityError(
            f"{args.dir} is a git repository that `gdn-parity tree` did not make, and smoke "
            "checks only such trees: make one with `gdn-parity tree NEWDIR`, or leave DIR out "
            "to use the cache's tree"
        )
    tree = materialise_tree(series, args.dir)
    report = smoke(tree)
    print(f"patched modules import from {tree}:")
    print(report, end="")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tree",
        help="materialise base + series as a git work tree",
        description="A git work tree: branch 'base' is sglang's pinned release laid out as "
        "upstream's python/sglang/ (usable as a v0.5.23 checkout for git am), and the "
        "current branch adds one commit per patch.",
    )
    p.add_argument("dir", nargs="?", type=path, help="where (default: the cache's tree/)")
    p.set_defaults(func=cmd_tree)

    p = sub.add_parser(
        "export",
        help="regenerate patches/ from a tree's commits",
        description="Write one patch per commit of the tree's base..HEAD to the series' "
        "patches/ (git format-patch with every option fixed, so the bytes do not depend on "
        "a user's git config), remove the patches no commit makes, and rewrite "
        "patches/series. The tree must be clean, its HEAD must descend from the pinned base "
        "commit and its branch 'base' must be that commit. The series must be a checkout's "
        "patches/ (--patches), not the copy an install ships.",
    )
    p.add_argument(
        "--tree",
        type=path,
        help="a tree that `gdn-parity tree` made, with the series as its commits "
        "(default: $GDN_PARITY_TREE, else the cache's tree/)",
    )
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "check",
        help="prove export(tree(patches)) == patches",
        description="Build base + patches/ in a temporary tree, export it again and compare "
        "the result with patches/ byte for byte (the patches and the series file). Prints "
        "each file that differs or is only on one side; exit status 1 when one does, 0 when "
        "patches/ is exactly what `gdn-parity export` makes of it.",
    )
    p.set_defaults(func=cmd_check)


def add_smoke_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "smoke",
        help="import the series' GDN kernel modules from the tree",
        description="Import the GDN kernel modules the series patches from a tree, in a "
        "fresh interpreter: a quick check that the series applies and those modules import "
        "(no model, no GPU; the other patched files are exercised by the tests and the "
        "demo). The cache's tree is made when missing; a tree named by DIR must "
        "exist (`gdn-parity tree DIR` makes one). A tree behind patches/ is brought up to "
        "date first, as `gdn-parity tree` would.",
    )
    p.add_argument(
        "dir",
        nargs="?",
        type=path,
        help="a tree from `gdn-parity tree` (default: the cache's tree/)",
    )
    p.set_defaults(func=cmd_smoke)
