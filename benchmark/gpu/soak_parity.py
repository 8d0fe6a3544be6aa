"""Randomized closed-loop soak of --gdn-verify-exact-parity on a GPU, for any tree.

For each configuration (activation dtype x SSM pool dtype x head shape x draft
length x eager/CUDA graph) it runs rounds of: random rows for N requests (some
padded), the exact-parity verify, the same rows fed to packed decode one token
at a time from the committed state, a comparison of every output row and every
step snapshot with ``torch.equal`` semantics (bit patterns, not tolerances),
then a commit of random accept lengths through sglang's scatter kernel, and the
next round from the committed pool.

The reference is packed decode with ``exact_parity=True`` where the tree's
wrapper has it (the flag's decode). With ``--base-tree`` it also checks that the
tree's packed decode without the flag is bitwise equal to packed decode of that
tree (sglang 0.5.23) over the same closed loop, and reports (without failing)
how often the flag's decode differs from it.

Negative controls: one ulp added to one output element, and to one snapshot
element, must each be reported as a difference by the same comparison.

Writes ``soak.json`` and ``soak.md`` under ``--out``; on a difference it also
writes the compiled decode/verify kernels (TTGIR, PTX, SASS) to
``kernels-<act>-<pool>.tar.gz``. Exit 1 if any difference was found.

    python benchmark/gpu/soak_parity.py --tree TREE [--base-tree BASE] --rounds 10000 --out OUT
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import inspect
import io
import json
import os
import random
import sys
import tarfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import triton

from gdn_parity.sandbox.bare_import import import_sglang_from
from gpu_common import gpu_env

DEVICE = os.environ.get("SOAK_DEVICE", "cuda")  # "cpu": a smoke run under TRITON_INTERPRET
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
# (H, HV, K=V): GQA ratios 1-4, K=V 64/128/256; (16, 48, 128) and (4, 12, 128)
# are a Qwen3.5-class layer at TP1 and TP4.
SHAPES = [(16, 48, 128), (4, 12, 128), (2, 4, 64), (4, 16, 64), (1, 3, 256), (2, 2, 256)]
DRAFTS = [2, 3, 4, 5, 8]


@dataclass
class Config:
    act: str
    pool: str
    h: int
    hv: int
    k: int
    d: int
    graph: bool


@dataclass
class Difference:
    config: Config
    round: int
    what: str
    step: int
    elements: int
    max_abs: float


@dataclass
class PairResult:
    act: str
    pool: str
    configs: int = 0
    rounds: int = 0
    differences: int = 0
    decode_vs_base_rounds: int = 0
    decode_vs_base_differences: int = 0  # the tree's decode without the flag
    exact_decode_vs_base_differences: int = 0  # with the flag (reported, not a failure)
    first: list[Difference] = field(default_factory=list)


def bits(x: torch.Tensor) -> torch.Tensor:
    return x.view({2: torch.int16, 4: torch.int32}[x.element_size()])


def difference(x: torch.Tensor, y: torch.Tensor) -> tuple[int, float] | None:
    """(differing elements, max |x - y|) or None when the bit patterns are equal."""
    if x.shape != y.shape or x.dtype != y.dtype:
        raise ValueError(f"compare {x.shape}/{x.dtype} with {y.shape}/{y.dtype}")
    ne = bits(x) != bits(y)
    count = int(ne.sum())
    if count == 0:
        return None
    return count, float((x.float() - y.float()).abs().max())


def one_ulp_up(x: torch.Tensor, index: int) -> torch.Tensor:
    y = x.clone()
    flat = bits(y).view(-1)
    flat[index] += 1
    return y


def load_base_decode(base_tree: Path):
    """0.5.23's packed decode, loaded beside the tree's (its imports are unchanged)."""
    path = base_tree / "python/sglang/kernels/ops/attention/fla/fused_recurrent.py"
    spec = importlib.util.spec_from_file_location("base_fused_recurrent", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.fused_recurrent_gated_delta_rule_packed_decode


class Case:
    """One configuration's tensors: a pool, N x D rows, the verify buffers."""

    def __init__(self, cfg: Config, n: int, rng: random.Random):
        self.cfg, self.n = cfg, n
        act, pool = DTYPES[cfg.act], DTYPES[cfg.pool]
        slots = 2 * n + 3
        self.pool = (torch.randn(slots, cfg.hv, cfg.k, cfg.k, device=DEVICE) * 0.1).to(pool)
        qkv = 2 * cfg.h * cfg.k + cfg.hv * cfg.k
        rows = n * cfg.d
        self.mixed = torch.empty(rows, qkv, device=DEVICE, dtype=act)
        self.a = torch.empty(rows, cfg.hv, device=DEVICE, dtype=act)
        self.b = torch.empty(rows, cfg.hv, device=DEVICE, dtype=act)
        self.A_log = torch.randn(cfg.hv, device=DEVICE)
        self.dt_bias = torch.randn(cfg.hv, device=DEVICE)
        self.indices = torch.empty(n, device=DEVICE, dtype=torch.int32)
        self.scratch = torch.arange(n, device=DEVICE, dtype=torch.int32)
        self.intermediate = self.pool.new_zeros(n, cfg.d, cfg.hv, cfg.k, cfg.k)
        self.rng = rng

    def new_round(self) -> None:
        n, slots = self.n, self.pool.shape[0]
        idx = torch.tensor(self.rng.sample(range(slots), n), dtype=torch.int32)
        for i in range(n):
            if n > 1 and self.rng.random() < 0.15:
                idx[i] = -1  # a padded row, as CUDA graphs pad
        self.indices.copy_(idx)
        self.mixed.copy_(torch.randn(self.mixed.shape, device=DEVICE))
        self.a.copy_(torch.randn(self.a.shape, device=DEVICE))
        self.b.copy_(torch.randn(self.b.shape, device=DEVICE))


def run_config(fr, scatter, base_decode, cfg: Config, rounds: int, seed: int, result: PairResult):
    rng = random.Random(seed)
    torch.manual_seed(seed)
    n = rng.choice([1, 2, 3, 4, 7, 8, 16, 32, 64])
    case = Case(cfg, n, rng)
    k = cfg.k
    scale = k**-0.5

    def verify():
        return fr.fused_recurrent_gated_delta_rule_packed_verify(
            case.mixed, case.a, case.b, case.A_log, case.dt_bias, scale,
            case.pool, case.intermediate, case.indices, case.scratch,
            num_steps=cfg.d, use_qk_l2norm_in_kernel=True,
        )  # fmt: skip

    plain_decode = fr.fused_recurrent_gated_delta_rule_packed_decode
    exact_decode = plain_decode
    if "exact_parity" in inspect.signature(plain_decode).parameters:
        exact_decode = functools.partial(plain_decode, exact_parity=True)

    def decode(decode_fn, pool, t):
        rows = torch.arange(n, device=DEVICE) * cfg.d + t
        out = case.mixed.new_empty(n, 1, cfg.hv, k)
        decode_fn(
            case.mixed[rows].contiguous(), case.a[rows].contiguous(), case.b[rows].contiguous(),
            case.A_log, case.dt_bias, scale, pool, out, case.indices,
            use_qk_l2norm_in_kernel=True,
        )  # fmt: skip
        return out.view(n, cfg.hv, k)

    case.new_round()
    out = verify()  # compile outside any capture
    graph = None
    if cfg.graph:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = verify()
    for r in range(rounds):
        case.new_round()
        valid = case.indices >= 0
        committed = case.pool.clone()
        if graph is not None:
            graph.replay()
        else:
            out = verify()
        ref_pool = committed.clone()
        ref_out, ref_states = [], []
        for t in range(cfg.d):
            ref_out.append(decode(exact_decode, ref_pool, t))
            ref_states.append(ref_pool[case.indices.clamp(min=0).long()].clone())
        if base_decode is not None:
            result.decode_vs_base_rounds += 1
            base_pool, plain_pool = committed.clone(), committed.clone()
            base_out = [decode(base_decode, base_pool, t) for t in range(cfg.d)]
            plain_out = [decode(plain_decode, plain_pool, t) for t in range(cfg.d)]
            for outs, pool, field_name in (
                (plain_out, plain_pool, "decode_vs_base_differences"),
                (ref_out, ref_pool, "exact_decode_vs_base_differences"),
            ):
                if difference(base_pool, pool) or any(
                    difference(b[valid], o[valid]) for b, o in zip(base_out, outs, strict=True)
                ):
                    setattr(result, field_name, getattr(result, field_name) + 1)
        got_out = out.view(n, cfg.d, cfg.hv, k)
        bad = False
        for t in range(cfg.d):
            for what, x, y in (
                ("output", got_out[:, t][valid], ref_out[t][valid]),
                ("snapshot", case.intermediate[:, t][valid], ref_states[t][valid]),
            ):
                diff = difference(x, y)
                if diff:
                    bad = True
                    if len(result.first) < 10:
                        result.first.append(Difference(cfg, r, what, t, diff[0], diff[1]))
        if bad:
            result.differences += 1
        result.rounds += 1
        if r == 0:
            negative_controls(got_out[:, 0][valid], case.intermediate[:, 0][valid])
        accept = torch.randint(1, cfg.d + 1, (n,), device=DEVICE)
        steps = torch.where(valid, accept - 1, -1)
        scatter(case.pool[None], case.intermediate[None], case.indices, steps)
        expected = torch.stack(ref_states, 1)[torch.arange(n, device=DEVICE), accept - 1]
        pool_diff = difference(case.pool[case.indices[valid].long()], expected[valid])
        if pool_diff:
            result.differences += 1
            if len(result.first) < 10:
                result.first.append(Difference(cfg, r, "commit", -1, *pool_diff))
    return bool(result.differences)


NEGATIVE_CONTROLS: list[str] = []


def negative_controls(out_row: torch.Tensor, snapshot: torch.Tensor) -> None:
    if out_row.numel() == 0:
        return
    for what, x in (("output", out_row), ("snapshot", snapshot)):
        i = random.randrange(x.numel())
        caught = difference(one_ulp_up(x, i), x) is not None
        NEGATIVE_CONTROLS.append(
            f"{what}: one ulp at element {i} {'caught' if caught else 'MISSED'}"
        )


def dump_kernels(fr, out: Path, tag: str) -> None:
    """Every compiled binary of the packed kernels, as TTGIR/PTX/SASS, in one archive."""
    from triton.tools.disasm import get_sass

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in dir(fr):
            fn = getattr(fr, name)
            if not name.startswith("fused_recurrent_gated_delta_rule_packed") or not hasattr(
                fn, "device_caches"
            ):
                continue
            for caches in fn.device_caches.values():
                for i, kernel in enumerate(caches[0].values()):
                    files = {ext: kernel.asm[ext] for ext in ("ttgir", "ptx") if ext in kernel.asm}
                    files["sass"] = get_sass(kernel.asm["cubin"])
                    for ext, text in files.items():
                        data = text.encode()
                        info = tarfile.TarInfo(f"{name}/{i}.{ext}")
                        info.size = len(data)
                        tar.addfile(info, io.BytesIO(data))
    (out / f"kernels-{tag}.tar.gz").write_bytes(buf.getvalue())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tree", type=Path, required=True)
    p.add_argument("--base-tree", type=Path)
    p.add_argument("--rounds", type=int, default=10000, help="rounds in total")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--pairs", default="bf16:bf16,bf16:fp16,bf16:fp32,fp16:bf16,fp16:fp16,fp16:fp32")
    p.add_argument("--dump", action="store_true", help="dump kernels of a failing pair")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    import_sglang_from(args.tree)
    from sglang.kernels.ops.attention.fla import fused_recurrent as fr
    from sglang.kernels.ops.mamba.mamba_state_scatter_triton import (
        fused_mamba_state_scatter_with_mask,
    )

    base_decode = load_base_decode(args.base_tree) if args.base_tree else None
    rng = random.Random(args.seed)
    pairs = [tuple(x.split(":")) for x in args.pairs.split(",")]
    configs = [
        Config(act, pool, h, hv, k, rng.choice(DRAFTS), graph)
        for act, pool in pairs
        for (h, hv, k) in SHAPES
        for graph in (False, True)
    ]
    per_config = -(-args.rounds // len(configs))  # at least --rounds in total
    results = {f"{a}:{p}": PairResult(a, p) for a, p in pairs}
    started = time.time()
    for i, cfg in enumerate(configs):
        res = results[f"{cfg.act}:{cfg.pool}"]
        res.configs += 1
        failed = run_config(
            fr, fused_mamba_state_scatter_with_mask, base_decode, cfg, per_config,
            args.seed * 1000 + i, res,
        )  # fmt: skip
        if (
            failed
            and args.dump
            and not (args.out / f"kernels-{cfg.act}-{cfg.pool}.tar.gz").exists()
        ):
            dump_kernels(fr, args.out, f"{cfg.act}-{cfg.pool}")
        print(
            f"[{time.time() - started:6.1f}s] {cfg} rounds={per_config} "
            f"diffs={res.differences} base={res.decode_vs_base_differences}",
            flush=True,
        )

    env = gpu_env(
        tree=str(args.tree),
        seconds=round(time.time() - started, 1),
        negative_controls=NEGATIVE_CONTROLS,
    )
    table = [asdict(r) for r in results.values()]
    (args.out / "soak.json").write_text(json.dumps({"env": env, "pairs": table}, indent=1))
    lines = [
        f"triton {triton.__version__}, torch {torch.__version__}, {env['gpu']}, {env['seconds']} s",
        "",
        "| act | pool | configs | rounds | rounds with a difference "
        "| decode vs 0.5.23: rounds | differ, flag off | differ, flag on |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results.values():
        lines.append(
            f"| {r.act} | {r.pool} | {r.configs} | {r.rounds} | {r.differences} | "
            f"{r.decode_vs_base_rounds} | {r.decode_vs_base_differences} "
            f"| {r.exact_decode_vs_base_differences} |"
        )
    caught = sum("caught" in c for c in NEGATIVE_CONTROLS)
    lines += ["", f"negative controls: {caught} of {len(NEGATIVE_CONTROLS)} caught"]
    for r in results.values():
        for d in r.first:
            lines.append(f"- {asdict(d)}")
    (args.out / "soak.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    missed = caught != len(NEGATIVE_CONTROLS) or not NEGATIVE_CONTROLS
    broken = any(r.differences or r.decode_vs_base_differences for r in results.values())
    return 1 if (broken or missed) else 0


if __name__ == "__main__":
    sys.exit(main())
