"""Verbs of the drift harness: ``demo`` and ``harness-server``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gdn_parity.cli.options import (
    int_at_least,
    port,
    positive_int,
    positive_int_list,
    probability_list,
    series_of,
    writable_dir,
)
from gdn_parity.drift.model.config import SIZES
from gdn_parity.drift.run.variants import VARIANTS, Variant, variant_named
from gdn_parity.errors import GdnParityError

DEVICES = ("cpu", "cuda")
SSM_DTYPES = ("bfloat16", "float16", "float32")
DEMO_VARIANTS = ("0.5.23", "beta-aligned", "exact-parity")
# The harness server runs the row-wise stack, which has no deterministic-inference variant.
SERVER_VARIANTS = [v.name for v in VARIANTS if not v.deterministic]


def variant_list(text: str) -> list[Variant]:
    """``--variants``: comma-separated names of ``VARIANTS``, each at most once."""
    names = text.split(",")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"{text!r} names a variant twice")
    try:
        return [variant_named(name) for name in names]
    except GdnParityError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _check_device(device: str, size: str) -> None:
    """Refuse CUDA without a CUDA device; warn that the large model on CPU takes hours."""
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise GdnParityError(
                "--device cuda, but torch sees no CUDA device: run on CPU with --device cpu"
            )
    elif size != "tiny":
        print(
            f"gdn-parity: warning: --size {size} on CPU runs every kernel under the Triton "
            "interpreter and takes hours; it is meant for --device cuda",
            file=sys.stderr,
        )


def cmd_demo(args: argparse.Namespace) -> int:
    from gdn_parity.debug.issue35150 import INPUT_IDS
    from gdn_parity.drift.demo import DemoPlan, run_demo
    from gdn_parity.drift.run.modes import demo_modes

    out_dir = Path(args.out)
    writable_dir(out_dir, "--out")
    trace_dir = Path(args.trace) if args.trace else None
    if trace_dir is not None:
        writable_dir(trace_dir, "--trace")
    _check_device(args.device, args.size)
    plan = DemoPlan(
        variants=args.variants,
        size=args.size,
        device=args.device,
        prompt=list(INPUT_IDS),
        tokens=args.tokens,
        modes=demo_modes(args.gammas, args.natural_gamma, args.accept_rates),
        ssm_dtype=args.ssm_dtype,
        attention=args.attention,
        stack=args.stack or ("server" if args.device == "cuda" else "rowwise"),
        seed=args.seed,
        out_dir=out_dir,
        trace_dir=trace_dir,
        jobs=args.jobs or (3 if args.device == "cpu" else 1),
    )
    report, holds = run_demo(series_of(args), plan)
    print(report, end="")
    print(f"wrote {plan.out_dir / 'demo.md'}, {plan.out_dir / 'drift.png'}")
    return 1 if holds is False else 0


def cmd_harness_server(args: argparse.Namespace) -> int:
    from gdn_parity.drift.harness_server import ServerPlan, listen, run_server
    from gdn_parity.drift.run.modes import Mode, ModeKind
    from gdn_parity.drift.run.variants import variant_tree

    trace_dir = Path(args.trace) if args.trace else None
    if trace_dir is not None:
        writable_dir(trace_dir, "--trace")
    _check_device(args.device, args.size)
    variant = variant_named(args.variant)
    server = listen(args.host, args.port)
    plan = ServerPlan(
        variant=variant,
        tree=variant_tree(series_of(args), variant),
        mode=Mode(ModeKind(args.mode), args.gamma if args.mode == "forced-reject" else 0),
        size=args.size,
        device=args.device,
        ssm_dtype=args.ssm_dtype,
        context_length=args.context_length,
        trace_dir=trace_dir,
    )
    run_server(plan, server)
    return 0


def _model_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--size",
        default="tiny",
        choices=sorted(SIZES),
        help="the harness model: tiny (CPU, default) or large (a GPU)",
    )
    p.add_argument(
        "--device",
        default="cpu",
        choices=DEVICES,
        help="cpu (default: sglang's Triton kernels under the interpreter) or cuda",
    )
    p.add_argument(
        "--ssm-dtype",
        default="bfloat16",
        choices=SSM_DTYPES,
        help="dtype of the GDN state pool, as sglang's --mamba-ssm-dtype (bfloat16)",
    )


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="Base vs DSpark-style verify on a tiny hybrid GDN model, three numerics",
        description="Run Base greedy decode, forced reject (every draft rejected) and "
        "natural acceptance on the harness's hybrid model, with sglang 0.5.23's kernels, "
        "the series with the flag off, and --gdn-verify-exact-parity. Writes demo.md "
        "(table), demo.json (raw results) and drift.png (figure) under --out. Exit status "
        "1 when exact parity does not hold, 2 on bad input.",
    )
    _model_arguments(p)
    p.add_argument(
        "--tokens", type=int_at_least(2), default=32, help="new tokens per mode (default 32)"
    )
    p.add_argument(
        "--gammas",
        type=positive_int_list,
        default=[1, 2, 3, 4],
        help="forced-reject gammas (1,2,3,4)",
    )
    p.add_argument(
        "--natural-gamma", type=positive_int, default=3, help="gamma of the natural modes (3)"
    )
    p.add_argument(
        "--accept-rates",
        type=probability_list,
        default=[0.5, 0.9],
        help="the drafter's acceptance rates for the natural modes (0.5,0.9)",
    )
    p.add_argument(
        "--attention",
        default="torch",
        choices=["torch", "sglang-triton"],
        help="full attention: row-invariant torch (default), or sglang's Triton decode and "
        "extend kernels, to measure their own contribution",
    )
    p.add_argument(
        "--stack",
        choices=["server", "rowwise"],
        help="server: a padded batch through sglang's backends, one GEMM per linear layer "
        "(default on cuda); rowwise: one request, row-invariant torch (default on cpu)",
    )
    p.add_argument(
        "--variants",
        type=variant_list,
        default=",".join(DEMO_VARIANTS),
        help="comma-separated, from: "
        + "; ".join(f"{v.name} ({v.description})" for v in VARIANTS)
        + f"; default {','.join(DEMO_VARIANTS)}",
    )
    p.add_argument("--seed", type=int, default=0, help="the drafter's seed")
    p.add_argument("--out", default="demo-out", help="table, raw results and figure (demo-out/)")
    p.add_argument("--trace", help="also write sglang GDN state traces under this directory")
    p.add_argument("--jobs", type=positive_int, help="variants run in parallel (cpu: 3, cuda: 1)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser(
        "harness-server",
        help="serve the drift harness's model with sglang's /generate JSON",
        description="A small HTTP server that answers sglang's POST /generate with the "
        "drift harness's model, in Base or forced-reject speculative mode, with the "
        "numerics of one variant. For testing gdn-parity repro and trace-diff end to end.",
    )
    p.add_argument(
        "--variant",
        default="exact-parity",
        choices=SERVER_VARIANTS,
        help="the numerics (exact-parity)",
    )
    p.add_argument("--mode", default="base", choices=["base", "forced-reject"])
    p.add_argument(
        "--gamma", type=positive_int, default=1, help="drafts per verify (forced-reject)"
    )
    _model_arguments(p)
    p.add_argument(
        "--context-length", type=int_at_least(16), default=1024, help="tokens per request (1024)"
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=port, default=30000, help="0 picks a free port (30000)")
    p.add_argument("--trace", help="write the GDN state trace (one file) to this directory")
    p.set_defaults(func=cmd_harness_server)
