"""What patch 0002 changes in the default target-verify kernel, bit for bit, on a GPU.

0002 moves ``fused_sigmoid_gating_delta_rule_update``'s GDN gate onto ``gdn_gate.py``:
``g`` from the ``softplus_beta`` form to ``gdn_gate_g``, ``beta`` from
``1 / (1 + exp(-b))`` to ``gdn_beta`` (``tl.sigmoid``, rounded through ``b``'s dtype).
Both trees (0.5.23 + 0001, and + 0002) run the same seeded verify of T tokens per request
(outputs and every step's state snapshot) for each activation dtype, SSM pool dtype, HV
and N; the parent compares them with ``torch.equal``. With fp32 activations the beta
rounding is the identity, so any difference there is the rewritten ``g`` or sigmoid.

    PYTHONPATH=python python benchmark/gpu/studies/verify_default_change.py --out DIR
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

from gdn_parity.queue.series import load_series
from gdn_parity.queue.tree import materialise_tree
from gdn_parity.sandbox.bare_import import import_sglang_from

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # gpu_common

K = V = 128
T = 4
ACTS = ("bfloat16", "float16", "float32")
POOLS = ("bfloat16", "float32")
HVS = (12, 48)
NS = (1, 8)


def cases() -> list[tuple[str, str, int, int]]:
    return list(itertools.product(ACTS, POOLS, HVS, NS))


def measure(tree: Path, dump: Path) -> None:
    import_sglang_from(tree)
    import torch
    from sglang.kernels.ops.attention.linear.fused_sigmoid_gating_recurrent import (
        fused_sigmoid_gating_delta_rule_update,
    )

    results = {}
    for seed, (act, pool_name, hv, n) in enumerate(cases()):
        gen = torch.Generator(device="cuda").manual_seed(seed)
        dtype, pool_dtype, h = getattr(torch, act), getattr(torch, pool_name), hv // 3
        rows = n * T

        def randn(*shape, gen=gen):
            return torch.randn(*shape, generator=gen, device="cuda")

        mixed = randn(rows, 2 * h * K + hv * V).to(dtype)
        a, b = randn(rows, hv).to(dtype), randn(rows, hv).to(dtype)
        A_log, dt_bias = randn(hv), randn(hv)
        pool = (randn(n + 1, hv, V, K) * 0.1).to(pool_dtype)
        idx = torch.randperm(n + 1, generator=gen, device="cuda")[:n].int()
        q, k, v = torch.split(mixed, [h * K, h * K, hv * V], dim=-1)
        inter = pool.new_zeros(n, T, hv, V, K)
        out = fused_sigmoid_gating_delta_rule_update(
            A_log, a, dt_bias, 1.0, 20.0, q.reshape(1, rows, h, K), k.reshape(1, rows, h, K),
            v.reshape(1, rows, hv, V), b, pool, idx, scale=K**-0.5,
            use_qk_l2norm_in_kernel=True,
            cu_seqlens=torch.arange(0, rows + 1, T, device="cuda", dtype=torch.int32),
            disable_state_update=True, intermediate_states_buffer=inter,
            intermediate_state_indices=torch.arange(n, device="cuda", dtype=torch.int32),
            cache_steps=T,
        )  # fmt: skip
        results[f"{act}/{pool_name}/hv{hv}/n{n}"] = (out.cpu(), inter.cpu())
    torch.save(results, dump)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, help="where the table goes (required but with --worker)")
    p.add_argument("--root", type=Path, default=Path("/tmp/gdn-parity-gpu"))
    p.add_argument("--worker", type=Path, help="internal: one tree")
    p.add_argument("--dump", type=Path, help="internal: where the worker saves its tensors")
    args = p.parse_args()
    if args.worker:
        measure(args.worker, args.dump)
        return
    if args.out is None:
        p.error("--out is required")

    import subprocess

    import torch

    from gpu_common import gpu_env

    series = load_series()
    args.out.mkdir(parents=True, exist_ok=True)
    dumps = {}
    for name, prefix in (("0.5.23", 1), ("0002", 2)):
        tree = materialise_tree(series.prefix(prefix), args.root / f"verify-{prefix}")
        dumps[name] = args.out / f"verify-{name}.pt"
        subprocess.run(
            [
                sys.executable,
                __file__,
                "--worker",
                str(tree),
                "--dump",
                str(dumps[name]),
            ],
            check=True,
        )
    before, after = (torch.load(dumps[n]) for n in ("0.5.23", "0002"))
    env = gpu_env(patches=list(series.patches[:2]))
    lines = [
        f"GPU {env['gpu']}, torch {env['torch']}, triton {env['triton']}; T = {T} tokens per "
        f"request, K = V = {K}, H = HV / 3",
        "",
        "| activations | SSM pool | HV | N | outputs equal | snapshots equal | "
        "output elements that differ | snapshot elements that differ |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rows = []
    for key in before:
        (o0, s0), (o1, s1) = before[key], after[key]
        row = {
            "case": key,
            "out_equal": torch.equal(o0, o1),
            "state_equal": torch.equal(s0, s1),
            "out_differ": int((o0 != o1).sum()),
            "state_differ": int((s0 != s1).sum()),
        }
        rows.append(row)
        act, pool, hv, n = key.split("/")
        lines.append(
            f"| {act} | {pool} | {hv[2:]} | {n[1:]} | {'yes' if row['out_equal'] else 'no'} | "
            f"{'yes' if row['state_equal'] else 'no'} | {row['out_differ']} of {o0.numel()} | "
            f"{row['state_differ']} of {s0.numel()} |"
        )
    for path in dumps.values():
        path.unlink()
    (args.out / "verify_default_change.json").write_text(
        json.dumps({"env": env, "rows": rows}, indent=1)
    )
    (args.out / "verify_default_change.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
