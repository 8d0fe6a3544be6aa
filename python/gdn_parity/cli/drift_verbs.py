"""Verbs of the drift harness: ``demo``, ``cost``, ``harness-server`` and ``model-dir``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gdn_parity.cli.options import (
    int_at_least,
    int_list_at_least,
    integer,
    path,
    port,
    positive_int,
    positive_int_list,
    positive_number,
    probability_list,
    require_extra,
    series_of,
    writable_dirs,
)
from gdn_parity.debug.issue35150 import INPUT_IDS
from gdn_parity.drift.cost.fit import (
    PREFILL_CHUNK,
    CostMemory,
    Unfit,
    refusal,
    skip_line,
    unfit,
)
from gdn_parity.drift.model.config import SIZES
from gdn_parity.drift.model.footprint import RunHolds
from gdn_parity.drift.model.server.padding import MAX_BATCH
from gdn_parity.drift.model.stacks import default_stack, kv_cache_problem
from gdn_parity.drift.modeldir.configs import MAX_GAMMA as MAX_DRAFT_BLOCK
from gdn_parity.drift.run.variants import VARIANTS, Variant, variant_named
from gdn_parity.errors import GdnParityError
from gdn_parity.notes import note

DEVICES = ("cpu", "cuda")
SSM_DTYPES = ("bfloat16", "float16", "float32")
KV_CACHE_DTYPES = ("auto", "fp8_e4m3")  # server.backends.KV_CACHE_DTYPES (no sglang import here)
ACTIVATION_DTYPES = ("bfloat16", "float16")
# The demo's variants unless --variants names others, per stack: 0.5.23's kernels, and the
# variant whose claim the stack's closing line judges (drift.demo.CONTRACT_VARIANT).
DEMO_VARIANTS = {
    "rowwise": ("0.5.23", "beta-aligned", "exact-parity"),
    "server": ("0.5.23", "exact-parity", "deterministic-exact-parity"),
}
DEFAULT_BATCH = 5  # the server stack's: padded to 8 in a Base server's decode
MAX_TOKENS = 100_000  # the KV cache and the recorded rows grow with it: beyond, a run fills memory
# A verify round holds its gamma + 1 rows at once, each with its fp32 logits over Qwen3.5's
# vocabulary (about 1 MiB) and a GDN state snapshot (6 MiB at --size large): 256 drafts take
# about 1.8 GiB per worker there. The KV cache grows with gamma too.
MAX_GAMMA = 256
# The harness server allocates its KV cache whole at start-up: 512 MiB at --size large for
# this many tokens (the GPU sizes are checked against the GPU's memory as well).
MAX_CONTEXT = 131_072
COST_VARIANTS = [v.name for v in VARIANTS if v.isolate is None]  # the server configurations
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


def context_list(text: str) -> list[int]:
    """``--context``: comma-separated token counts, each at least 1 and named once."""
    values = positive_int_list(text)
    if len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"{text!r} names a context twice")
    return values


def demo_variants(requested: list[Variant] | None, stack: str) -> list[Variant]:
    """The demo's variants: ``--variants``, else the stack's defaults (``DEMO_VARIANTS``)."""
    return requested or [variant_named(name) for name in DEMO_VARIANTS[stack]]


def _check_device(device: str, on_cpu: str = "--device cpu") -> None:
    """Refuse CUDA without a CUDA device, naming ``on_cpu``: what runs the same on CPU."""
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise GdnParityError(
                f"--device cuda, but torch sees no CUDA device: run on CPU with {on_cpu}"
            )


def _demo_on_cpu(args: argparse.Namespace) -> str:
    """The arguments that run this demo on CPU: ``--device cpu``, and ``--stack server`` where
    the run needs that stack (the CPU default is the row-wise stack, which refuses the rest)."""
    server = args.stack is None and (
        args.kv_cache_dtype != "auto"
        or args.batch not in (None, 1)
        or any(v.deterministic for v in args.variants or ())
    )
    return "--device cpu --stack server" if server else "--device cpu"


def _check_fits(
    device: str, size: str, dtype: str, ssm_dtype: str, holds: RunHolds, workers: int
) -> None:  # fmt: skip
    """Refuse a GPU size on the CPU, and a model that cannot fit the GPU, ``workers`` copies
    at once, each holding ``holds``."""
    config = SIZES[size]
    if device != "cuda":
        if config.gpu_only:
            raise GdnParityError(
                f"--size {size} is a GPU size ({config.parameters() / 1e9:.1f} B parameters; "
                "on CPU the Triton interpreter would take days and the host run out of "
                "memory): pass --device cuda, or --size tiny on CPU"
            )
        return
    import torch

    from gdn_parity.drift.model.footprint import fit_problem

    problem = fit_problem(
        config,
        getattr(torch, dtype).itemsize,
        getattr(torch, ssm_dtype).itemsize,
        holds,
        workers,
        torch.cuda.get_device_properties(0).total_memory,
    )
    if problem is not None:
        raise GdnParityError(problem)


def _warn_about_size(verb: str, device: str, size: str) -> None:
    """Warn that the large model on CPU takes hours (after the checks: a refusal is one line)."""
    if device == "cpu" and size != "tiny":
        print(
            f"gdn-parity {verb}: warning: --size {size} on CPU runs every kernel under the Triton "
            "interpreter and takes hours; it is meant for --device cuda",
            file=sys.stderr,
        )


def _batch(requested: int | None, stack: str) -> int:
    """Requests per batch: the server stack's 5 by default; the row-wise stack serves one."""
    if stack == "rowwise":
        if requested not in (None, 1):
            raise GdnParityError(
                "--batch: the row-wise stack serves one request (it computes every row on "
                "its own, so a batch would change nothing); pass --stack server"
            )
        return 1
    if requested is not None and requested > MAX_BATCH:
        raise GdnParityError(f"--batch {requested}: at most {MAX_BATCH} (sglang's graph sizes)")
    return requested or DEFAULT_BATCH


def cmd_demo(args: argparse.Namespace) -> int:
    require_extra("demo", args.command)
    from gdn_parity.drift.demo import DemoPlan, run_demo
    from gdn_parity.drift.run.modes import demo_modes

    _check_device(args.device, _demo_on_cpu(args))
    stack = args.stack or default_stack(args.device)
    batch = _batch(args.batch, stack)
    series = series_of(args)
    plan = DemoPlan(
        variants=demo_variants(args.variants, stack),
        size=args.size,
        device=args.device,
        prompt=list(INPUT_IDS),
        tokens=args.tokens,
        modes=demo_modes(args.gammas, args.natural_gamma, args.accept_rates),
        ssm_dtype=args.ssm_dtype,
        attention=args.attention,
        stack=stack,
        seed=args.seed,
        out_dir=args.out,
        trace_dir=args.trace,
        jobs=args.jobs or (3 if args.device == "cpu" else 1),
        batch=batch,
        attribute=args.attribute,
        stop_at_divergence=args.stop_at_divergence,
        dtype=args.dtype,
        kv_cache_dtype=args.kv_cache_dtype,
        kv_scale=args.kv_cache_scale,
    )
    draft_tokens = max([*args.gammas, args.natural_gamma]) + 1
    workers = min(plan.jobs, len(plan.variants))
    # the server stack's max_len for a demo, and the Base trajectory's states, one per token
    holds = RunHolds(
        batch,
        draft_tokens,
        context=len(INPUT_IDS) + args.tokens + draft_tokens,
        kept_states=args.tokens,
    )
    _check_fits(args.device, args.size, args.dtype, args.ssm_dtype, holds, workers)
    writable_dirs((plan.out_dir, "--out"), (plan.trace_dir, "--trace"))
    _warn_about_size(args.command, args.device, args.size)
    report, holds = run_demo(series, plan)
    print(report, end="")
    out = plan.out_dir
    print(f"wrote {out / 'demo.md'}, {out / 'demo.json'}, {out / 'drift.png'}")
    return 1 if holds is False else 0


def _check_contexts(size: str, contexts: list[int] | None, gammas: list[int]) -> None:
    """Refuse a context whose widest verify reaches past the model's context length."""
    limit, gamma = SIZES[size].max_positions, max(gammas)
    longest = max(contexts or [0])
    if longest + gamma + 1 > limit:
        raise GdnParityError(
            f"--context {longest} and --gamma {gamma}: the verify reaches position "
            f"{longest + gamma}, past the model's context length, {limit} (Qwen3.5's "
            f"max_position_embeddings): pass a --context of at most {limit - gamma - 1}"
        )


def _skipped_pairs(args: argparse.Namespace, prompt_len: int) -> list[Unfit]:
    """The (context, batch) pairs that do not fit the GPU, after a warning that names them;
    refuse the run when none fits."""
    import torch

    config = SIZES[args.size]
    kv_bytes = 1 if args.kv_cache_dtype == "fp8_e4m3" else 2  # the pool's element; else bf16
    memory = CostMemory(config, 2, getattr(torch, args.ssm_dtype).itemsize, kv_bytes, args.gamma)
    contexts = args.context or [prompt_len]
    unfits = unfit(memory, contexts, args.batch, torch.cuda.get_device_properties(0).total_memory)
    if len(unfits) == len(contexts) * len(args.batch):
        raise GdnParityError(refusal(config, unfits))
    if unfits:
        note(f"warning: {skip_line(unfits)}")
    return unfits


def cmd_cost(args: argparse.Namespace) -> int:
    require_extra("demo", args.command)
    from gdn_parity.drift.cost.plan import CostPlan, run_cost

    if args.profile and args.no_graphs:
        raise GdnParityError(
            "--profile profiles the kernels a CUDA graph replays: drop --no-graphs or --profile"
        )
    _check_contexts(args.size, args.context, args.gamma)
    if args.device != "cuda":
        raise GdnParityError(
            "cost times GPU kernels: pass --device cuda (under the Triton interpreter it "
            "would time the interpreter)"
        )
    import torch

    if not torch.cuda.is_available():
        raise GdnParityError(
            "cost times GPU kernels, and torch finds no CUDA device here: run it on a "
            "machine with one"
        )
    if max(args.batch) > MAX_BATCH:
        raise GdnParityError(f"--batch sizes must be 1 to {MAX_BATCH}")
    problem = kv_cache_problem("server", args.kv_cache_dtype, args.kv_cache_scale)
    if problem is not None:
        raise GdnParityError(problem)
    skipped = _skipped_pairs(args, len(INPUT_IDS))
    series = series_of(args)
    out_dir: Path = args.out
    writable_dirs((out_dir, "--out"))
    plan = CostPlan(
        variants=args.variants,
        size=args.size,
        device=args.device,
        prompt=list(INPUT_IDS),
        ssm_dtype=args.ssm_dtype,
        batches=args.batch,
        gammas=args.gamma,
        replays=args.replays,
        graphs=not args.no_graphs,
        out_dir=out_dir,
        kv_cache_dtype=args.kv_cache_dtype,
        kv_scale=args.kv_cache_scale,
        rounds=args.rounds,
        profile=args.profile,
        contexts=args.context,
        skipped=skipped,
    )
    print(run_cost(series, plan), end="")
    profile = f", {out_dir / 'profile.json'}" if (out_dir / "profile.json").exists() else ""
    print(f"wrote {out_dir / 'cost.md'}, {out_dir / 'cost.json'}{profile}")
    return 0


def cmd_harness_server(args: argparse.Namespace) -> int:
    require_extra("demo", args.command)
    from gdn_parity.drift.harness_server import ServerPlan, listen, run_server
    from gdn_parity.drift.run.modes import Mode, ModeKind
    from gdn_parity.drift.run.variants import variant_tree

    _check_device(args.device)
    holds = RunHolds(1, args.gamma + 1, context=args.context_length)
    _check_fits(args.device, args.size, "bfloat16", args.ssm_dtype, holds, 1)
    series = series_of(args)
    variant = variant_named(args.variant)
    server = listen(args.host, args.port)
    trace_dir: Path | None = args.trace
    writable_dirs((trace_dir, "--trace"))
    _warn_about_size(args.command, args.device, args.size)
    plan = ServerPlan(
        variant=variant,
        tree=variant_tree(series, variant),
        mode=Mode(ModeKind(args.mode), args.gamma if args.mode == "forced-reject" else 0),
        size=args.size,
        device=args.device,
        ssm_dtype=args.ssm_dtype,
        context_length=args.context_length,
        trace_dir=trace_dir,
    )
    run_server(plan, server)
    return 0


def draft_gamma(text: str) -> int:
    """``model-dir --gamma``: 1 to ``MAX_DRAFT_BLOCK``, with the reason for the cap."""
    value = integer(text)
    if not 1 <= value <= MAX_DRAFT_BLOCK:
        raise argparse.ArgumentTypeError(
            f"{text!r} must be 1 to {MAX_DRAFT_BLOCK} (a DSpark block longer than sglang's "
            f"DFlash default of {MAX_DRAFT_BLOCK} has no draft to match, and the verify keeps "
            "gamma + 1 GDN states per request)"
        )
    return value


def cmd_model_dir(args: argparse.Namespace) -> int:
    from gdn_parity.drift.modeldir.write import ModelDirPlan, plan_problem, write_model_dir

    plan = ModelDirPlan(
        size=args.size,
        out=args.out,
        gamma=args.gamma,
        device=args.device,
        weights=not args.no_weights,
    )
    problem = plan_problem(plan)
    if problem is not None:
        raise GdnParityError(problem)
    if plan.weights:
        require_extra("demo", args.command)
        _check_device(args.device, "--no-weights" if SIZES[args.size].gpu_only else "--device cpu")
    writable_dirs((args.out, "OUT"))
    written = write_model_dir(plan)
    weights = (
        f"{written.weight_bytes / 1e9:.2f} GB of seeded weights"
        if written.weight_bytes
        else "no weights (serve it with --load-format dummy)"
    )
    print(f"wrote {written.target} (config, {weights}) and {written.draft} (config)")
    return 0


def _model_arguments(p: argparse.ArgumentParser, on_gpu: bool = False) -> None:
    p.add_argument(
        "--size",
        default="large" if on_gpu else "tiny",
        choices=sorted(SIZES),
        help="the harness model: tiny ("
        + ("the smallest" if on_gpu else "CPU, default")
        + "), large (a GPU"
        + (", default" if on_gpu else "")
        + "), 27b (Qwen3.5-27B's geometry, 64 layers) or 27b-8l (its layers, 8 of them)",
    )
    p.add_argument(
        "--device",
        default="cuda" if on_gpu else "cpu",
        choices=DEVICES,
        help=(
            "cuda (default); cpu is refused: the interpreter's times mean nothing"
            if on_gpu
            else "cpu (default: sglang's Triton kernels under the interpreter) or cuda"
        ),
    )
    p.add_argument(
        "--ssm-dtype",
        default="bfloat16",
        choices=SSM_DTYPES,
        help="dtype of the GDN state pool, as sglang's --mamba-ssm-dtype (bfloat16)",
    )


def _kv_cache_arguments(p: argparse.ArgumentParser, has_stacks: bool) -> None:
    """The server stack's KV pool, as sglang's --kv-cache-dtype (the same for every variant);
    ``has_stacks``: the verb takes --stack (demo), else it runs the server stack (cost)."""
    p.add_argument(
        "--kv-cache-dtype",
        default="auto",
        choices=KV_CACHE_DTYPES,
        help="the server stack's KV cache, as sglang's --kv-cache-dtype: auto (the model's "
        "dtype, default) or fp8_e4m3 (sglang's MHATokenToKVPool in float8_e4m3fn, and its "
        "attention kernels reading it back)"
        + ("; the row-wise stack refuses fp8_e4m3" if has_stacks else ""),
    )
    p.add_argument(
        "--kv-cache-scale",
        type=positive_number,
        metavar="SCALE",
        help="with --kv-cache-dtype fp8_e4m3: a per-tensor K and V scale on every attention "
        "layer, as a quantized checkpoint's KV scales (K/V divided by it into the pool, "
        "multiplied back in the kernels); default none, as sglang for a checkpoint without "
        "KV scales (unit scale)",
    )


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="Base vs DSpark-style verify on a hybrid GDN model, per numerics variant",
        description="Run Base greedy decode, forced reject (every draft rejected) and "
        "natural acceptance on the harness's hybrid model, once per variant of the numerics "
        f"(--variants; by default {', '.join(DEMO_VARIANTS['rowwise'])} on the row-wise stack: "
        "sglang 0.5.23's kernels, the series with the flag off, and --gdn-verify-exact-parity; "
        f"{', '.join(DEMO_VARIANTS['server'])} on the server stack, the last with "
        "--enable-deterministic-inference as well). Writes demo.md "
        "(table), demo.json (raw results) and drift.png (figure) under --out. Exit status "
        "1 when exact parity does not hold, 2 on bad input.",
    )
    _model_arguments(p)
    p.add_argument(
        "--dtype",
        default="bfloat16",
        choices=ACTIVATION_DTYPES,
        help="dtype of the weights and activations, as sglang's --dtype (bfloat16); the conv "
        "state stays bfloat16, as sglang's SGLANG_MAMBA_CONV_DTYPE default",
    )
    _kv_cache_arguments(p, has_stacks=True)
    p.add_argument(
        "--tokens",
        type=int_at_least(2, MAX_TOKENS),
        default=32,
        help=f"new tokens per mode (default 32, at most {MAX_TOKENS})",
    )
    p.add_argument(
        "--gammas",
        type=int_list_at_least(1, MAX_GAMMA),
        default=[1, 2, 3, 4],
        help=f"forced-reject gammas (1,2,3,4; each at most {MAX_GAMMA})",
    )
    p.add_argument(
        "--natural-gamma",
        type=int_at_least(1, MAX_GAMMA),
        default=3,
        help=f"gamma of the natural modes (3; at most {MAX_GAMMA})",
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
        "(default on cuda; on cpu about 12 minutes for the default run on 2 cores, five times "
        "the row-wise stack's); rowwise: one request, row-invariant torch (default on cpu)",
    )
    p.add_argument(
        "--batch",
        type=int_at_least(1),
        help=f"requests per batch on the server stack (default {DEFAULT_BATCH}; request 0 is "
        "compared with Base, the others have their own prompts and lengths), padded as "
        "sglang's CUDA graphs pad them; the row-wise stack serves one request",
    )
    p.add_argument(
        "--attribute",
        action="store_true",
        help="also record every component's output (GEMMs, norms, attention, conv, GDN) of "
        "the compared request and report, per variant and mode, the first one that is not "
        "bitwise Base decode's (an Attribution table in demo.md)",
    )
    p.add_argument(
        "--stop-at-divergence",
        action="store_true",
        help="end each speculative mode at its first token that diverges from Base's (saves "
        "time; its tokens and sha256 then cover the run so far)",
    )
    p.add_argument(
        "--variants",
        type=variant_list,
        help="comma-separated, from: "
        + "; ".join(f"{v.name} ({v.description})" for v in VARIANTS)
        + f"; default {','.join(DEMO_VARIANTS['rowwise'])} on the row-wise stack, "
        + f"{','.join(DEMO_VARIANTS['server'])} on the server stack",
    )
    p.add_argument("--seed", type=integer, default=0, help="the drafter's seed (0)")
    p.add_argument(
        "--out", type=path, default="demo-out", help="table, raw results and figure (demo-out/)"
    )
    p.add_argument(
        "--trace", type=path, help="also write sglang GDN state traces under this directory"
    )
    p.add_argument("--jobs", type=positive_int, help="variants run in parallel (cpu: 3, cuda: 1)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser(
        "cost",
        help="time one decode and one verify step of the server stack per variant (GPU)",
        description="For each variant, context (--context) and batch size: build the server stack, "
        "prefill every request, and time one decode forward and one verify forward per "
        "--gamma of the padded batch, replayed as a CUDA graph where the capture succeeds "
        "(median of --replays), beside its floor: the bytes the step must move over the copy "
        "bandwidth measured in the run. Variants run one after another. Writes cost.md and "
        "cost.json under --out. Needs --device cuda; 2 on bad input.",
    )
    _model_arguments(p, on_gpu=True)
    _kv_cache_arguments(p, has_stacks=False)
    p.add_argument(
        "--batch", type=positive_int_list, default=[1, 4, 32], help="batch sizes to time (1,4,32)"
    )
    p.add_argument(
        "--context",
        type=context_list,
        metavar="N[,N...]",
        help="tokens every request prefills before the timed steps; the table gets rows per "
        f"context. Seeded token ids, request 0's first {len(INPUT_IDS)} the reporter's, "
        f"prefilled in chunks of {PREFILL_CHUNK} tokens (sglang's chunked prefill). A "
        "(context, batch) that does not fit the GPU is skipped with a warning and a 'not "
        "run' row; a run where none fits, or a context past the model's context length "
        f"({SIZES['27b'].max_positions}), is refused. Default: the reporter's "
        f"{len(INPUT_IDS)} ids for request 0, fewer for the others",
    )
    p.add_argument(
        "--gamma",
        type=int_list_at_least(1, MAX_GAMMA),
        default=[3],
        help=f"drafts per verify; a list times one verify per gamma (3; each at most {MAX_GAMMA})",
    )
    p.add_argument("--replays", type=positive_int, default=50, help="timed replays (50)")
    p.add_argument(
        "--rounds",
        type=positive_int,
        default=1,
        help="run the variants this many times, in alternating order (A, B, B, A, ...); the "
        "table gives the median over rounds and ratios taken within a round (1)",
    )
    p.add_argument(
        "--no-graphs", action="store_true", help="time the eager forward, not a CUDA graph"
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="then run each variant once more, in a process that times nothing, with each "
        "step's eager forward under torch's profiler; cost.md gets each step's kernels per "
        "variant side by side (where the time goes), profile.json all of them",
    )
    p.add_argument(
        "--variants",
        type=variant_list,
        default=",".join(COST_VARIANTS),
        help="comma-separated (see demo --help); the first is the ratios' reference; "
        f"default {','.join(COST_VARIANTS)}",
    )
    p.add_argument("--out", type=path, default="cost-out", help="table and raw results (cost-out/)")
    p.set_defaults(func=cmd_cost)

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
    p.add_argument(
        "--mode",
        default="base",
        choices=["base", "forced-reject"],
        help="base: greedy decode, as a Base server (default); forced-reject: speculative, "
        "DSpark-style verify of --gamma drafts that rejects every draft and commits the "
        "target's own token (sglang#35150's experiment)",
    )
    p.add_argument(
        "--gamma",
        type=int_at_least(1, MAX_GAMMA),
        default=1,
        help=f"drafts per verify (forced-reject; 1; at most {MAX_GAMMA})",
    )
    _model_arguments(p)
    p.add_argument(
        "--context-length",
        type=int_at_least(16, MAX_CONTEXT),
        default=1024,
        help=f"tokens per request (1024; at most {MAX_CONTEXT})",
    )
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (127.0.0.1)")
    p.add_argument("--port", type=port, default=30000, help="0 picks a free port (30000)")
    p.add_argument(
        "--trace", type=path, help="write the GDN state trace (one file) to this directory"
    )
    p.set_defaults(func=cmd_harness_server)

    p = sub.add_parser(
        "model-dir",
        help="write the harness's model as directories a real sglang server loads",
        description="Write OUT/target and OUT/draft for a real sglang server. OUT/target is "
        "the harness's model as a text-only Qwen3.5 checkpoint: config.json, and the harness's "
        "seeded weights as safetensors, under the names and norm conventions of sglang's "
        "Qwen3_5ForCausalLM. Its greedy output varies as the harness model's does, not the one "
        "repeated token of --load-format dummy. OUT/draft holds the config.json of a DSpark draft "
        "(Qwen3DSparkModel), without weights. Every geometry number is the harness's for SIZE. "
        "Serve the target with launch_server --model-path OUT/target --skip-tokenizer-init (no "
        "tokenizer is written: requests carry input_ids) and --mamba-ssm-dtype bfloat16 (the "
        "harness's default SSM pool; the config says float32, as Qwen3.5's); after "
        "--no-weights, add --load-format dummy. A DSpark server adds --speculative-algorithm "
        "DSPARK --speculative-draft-model-path OUT/draft --speculative-draft-load-format dummy "
        "--speculative-dspark-block-size GAMMA. OUT must not exist, or be an empty directory. "
        "Everything is written beside it and renamed into place: a failure or an interrupt "
        "leaves nothing. 2 on bad input.",
    )
    p.add_argument(
        "size",
        choices=sorted(SIZES),
        metavar="SIZE",
        help="the harness model: tiny, large, 27b-8l or 27b (see demo --help)",
    )
    p.add_argument("out", type=path, metavar="OUT", help="the directory to write")
    p.add_argument(
        "--gamma",
        type=draft_gamma,
        default=3,
        help=f"the draft's block_size, the tokens it drafts per step (1 to {MAX_DRAFT_BLOCK}; 3); "
        "the server's --speculative-dspark-block-size overrides it",
    )
    p.add_argument(
        "--device",
        default="cpu",
        choices=DEVICES,
        help="where the weights are drawn: cpu (default) or cuda; 27b-8l's are drawn on the "
        "GPU, as the harness draws them, so it needs cuda (about 11 GB)",
    )
    p.add_argument(
        "--no-weights",
        action="store_true",
        help="write the configs only, for --load-format dummy (cost runs: dummy weights make "
        "every greedy output one repeated token); needed for 27b, whose 54 GB checkpoint is "
        "not written",
    )
    p.set_defaults(func=cmd_model_dir)
