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
from gdn_parity.issue35150 import MAX_NEW_TOKENS
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


def _int_list(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _float_list(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def cmd_demo(args: argparse.Namespace, series: Series) -> int:
    from gdn_parity.drift.config import SIZES
    from gdn_parity.drift.demo import DemoPlan, run_demo
    from gdn_parity.drift.modes import demo_modes
    from gdn_parity.drift.variants import variant_named
    from gdn_parity.issue35150 import INPUT_IDS

    if args.size not in SIZES:
        raise GdnParityError(f"--size must be one of {sorted(SIZES)}")
    if any(g < 1 for g in args.gammas) or args.natural_gamma < 1:
        raise GdnParityError("every gamma must be at least 1")
    if any(not 0 <= p <= 1 for p in args.accept_rates):
        raise GdnParityError("--accept-rates are probabilities in [0, 1]")
    if args.tokens < 2:
        raise GdnParityError("--tokens must be at least 2")
    plan = DemoPlan(
        variants=[variant_named(name) for name in args.variants.split(",")],
        size=args.size,
        device=args.device,
        prompt=list(INPUT_IDS),
        tokens=args.tokens,
        modes=demo_modes(args.gammas, args.natural_gamma, args.accept_rates),
        ssm_dtype=args.ssm_dtype,
        attention=args.attention,
        seed=args.seed,
        out_dir=Path(args.out),
        trace_dir=Path(args.trace) if args.trace else None,
        jobs=args.jobs or (3 if args.device == "cpu" else 1),
    )
    report, holds = run_demo(series, plan)
    print(report, end="")
    print(f"wrote {plan.out_dir / 'demo.md'}, {plan.out_dir / 'drift.png'}")
    return 1 if holds is False else 0


def cmd_trace_diff(args: argparse.Namespace, series: Series) -> int:
    from gdn_parity.trace_diff import diff_traces, read_trace, report

    base, spec = read_trace(Path(args.base)), read_trace(Path(args.spec))
    diff = diff_traces(base, spec, args.rid)
    if not diff.compared:
        raise GdnParityError("no state of SPEC has a counterpart in BASE: nothing was compared")
    for line in report(base, spec, diff, args.context):
        print(line)
    return 1 if diff.first is not None else 0


def cmd_repro(args: argparse.Namespace, series: Series) -> int:
    from gdn_parity.repro import load_input_ids, report, run_repro

    if args.max_new_tokens < 1 or args.repeats < 1 or args.timeout <= 0:
        raise GdnParityError("--max-new-tokens and --repeats must be >= 1, --timeout > 0")
    ids = load_input_ids(Path(args.input_ids) if args.input_ids else None)
    repro = run_repro(
        args.base_url, args.spec_url, ids, args.max_new_tokens, args.repeats, args.timeout, args.rid
    )
    lines, identical = report(repro, args.base_url, args.spec_url)
    print("\n".join(lines))
    return 0 if identical else 1


def cmd_harness_server(args: argparse.Namespace, series: Series) -> int:
    from gdn_parity.drift.modes import Mode
    from gdn_parity.drift.variants import variant_named, variant_tree
    from gdn_parity.harness_server import ServerPlan, run_server

    if args.gamma < 1:
        raise GdnParityError("--gamma must be at least 1")
    variant = variant_named(args.variant)
    plan = ServerPlan(
        variant=variant,
        tree=variant_tree(series, variant),
        mode=Mode("base") if args.mode == "base" else Mode("forced-reject", args.gamma),
        size=args.size,
        device=args.device,
        ssm_dtype=args.ssm_dtype,
        context_length=args.context_length,
        trace_dir=Path(args.trace) if args.trace else None,
    )
    run_server(plan, args.host, args.port)
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

    p = sub.add_parser(
        "demo",
        help="Base vs DSpark-style verify on a tiny hybrid GDN model, three numerics",
        description="Run Base greedy decode, forced reject (every draft rejected) and "
        "natural acceptance on the harness's hybrid model, with sglang 0.5.23's kernels, "
        "the series with the flag off, and --gdn-verify-exact-parity. Exit status 1 when "
        "exact parity does not hold.",
    )
    p.add_argument("--size", default="tiny", help="tiny (CPU, default) or large (GPU)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--tokens", type=int, default=32, help="new tokens per mode (default 32)")
    p.add_argument(
        "--gammas", type=_int_list, default=[1, 2, 3, 4], help="forced-reject gammas (1,2,3,4)"
    )
    p.add_argument("--natural-gamma", type=int, default=3, help="gamma of the natural modes (3)")
    p.add_argument(
        "--accept-rates",
        type=_float_list,
        default=[0.5, 0.9],
        help="the drafter's acceptance rates for the natural modes (0.5,0.9)",
    )
    p.add_argument("--ssm-dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    p.add_argument(
        "--attention",
        default="torch",
        choices=["torch", "sglang-triton"],
        help="full attention: row-invariant torch (default), or sglang's Triton decode and "
        "extend kernels, to measure their own contribution",
    )
    p.add_argument("--variants", default="0.5.23,beta-aligned,exact-parity")
    p.add_argument("--seed", type=int, default=0, help="the drafter's seed")
    p.add_argument("--out", default="demo-out", help="table, raw results and figure (demo-out)")
    p.add_argument("--trace", help="also write sglang GDN state traces under this directory")
    p.add_argument("--jobs", type=int, help="variants run in parallel (cpu: 3, cuda: 1)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser(
        "trace-diff",
        help="the first (position, layer, checkpoint) where two GDN state traces differ",
        description="Compare a speculative run's GDN state trace (SGLANG_GDN_STATE_TRACE or "
        "gdn-parity demo --trace) with a Base run's. Exit status 1 when a state differs, "
        "0 when every compared state is bitwise equal, 2 on bad input.",
    )
    p.add_argument("base", help="the Base run's trace (JSONL)")
    p.add_argument("spec", help="the speculative run's trace (JSONL)")
    p.add_argument("--rid", help="compare only this request id")
    p.add_argument("--context", type=int, default=2, help="positions shown around it (2)")
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
    p.add_argument("--input-ids", help="a file of input ids (JSON list or comma-separated)")
    p.add_argument("--max-new-tokens", type=int, default=MAX_NEW_TOKENS)
    p.add_argument("--repeats", type=int, default=1, help="send the request this many times")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per request (600)")
    p.add_argument("--rid", default="gdn-parity-repro", help="request id prefix (same on both)")
    p.set_defaults(func=cmd_repro)

    p = sub.add_parser(
        "harness-server",
        help="serve the drift harness's model with sglang's /generate JSON",
        description="A small HTTP server that answers sglang's POST /generate with the "
        "drift harness's model, in Base or forced-reject speculative mode, with the "
        "numerics of one variant. For testing gdn-parity repro and trace-diff end to end.",
    )
    p.add_argument("--variant", default="exact-parity", help="0.5.23, beta-aligned or exact-parity")
    p.add_argument("--mode", default="base", choices=["base", "forced-reject"])
    p.add_argument("--gamma", type=int, default=1, help="drafts per verify (forced-reject)")
    p.add_argument("--size", default="tiny", choices=["tiny", "large"])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--ssm-dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    p.add_argument("--context-length", type=int, default=1024)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000, help="0 picks a free port")
    p.add_argument("--trace", help="write the GDN state trace (one file) to this directory")
    p.set_defaults(func=cmd_harness_server)

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
