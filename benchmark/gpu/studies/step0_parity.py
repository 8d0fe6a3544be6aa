"""Packed decode vs target verify step 0 on a GPU, before and after the series.

For K=V=128 and each HV, N, SSM pool dtype and b regime, feed the same
(mixed_qkv, a, b) rows and committed state to
``fused_recurrent_gated_delta_rule_packed_decode`` and to one step of
``fused_sigmoid_gating_delta_rule_update`` (T=1, intermediate states on), and
compare the outputs and the stored states with ``torch.equal``.

    PYTHONPATH=python python benchmark/gpu/studies/step0_parity.py --out DIR [--patches 2]

The two trees (the base alone, and base + the first patches) are made with the
tool's own queue code (``gdn-parity tree``); the wheel must be in the cache.
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
from gpu_common import gpu_env, run_worker  # noqa: E402

K = V = 128
HVS = (8, 32, 48)
NS = (1, 4, 64)
POOLS = ("bfloat16", "float32")
B_REGIMES = ("b=-0.5", "b~N(0,1)")


def measure(tree: Path) -> list[dict]:
    import_sglang_from(tree)
    import torch
    from sglang.kernels.ops.attention.fla.fused_recurrent import (
        fused_recurrent_gated_delta_rule_packed_decode,
    )
    from sglang.kernels.ops.attention.linear.fused_sigmoid_gating_recurrent import (
        fused_sigmoid_gating_delta_rule_update,
    )

    rows = []
    for seed, (hv, n, pool_name, regime) in enumerate(itertools.product(HVS, NS, POOLS, B_REGIMES)):
        torch.manual_seed(seed)
        h = hv // 2
        dev = "cuda"
        pool_dtype = getattr(torch, pool_name)
        mixed = torch.randn(n, 2 * h * K + hv * V, device=dev).bfloat16()
        a = torch.randn(n, hv, device=dev).bfloat16()
        if regime == "b=-0.5":
            b = torch.full((n, hv), -0.5, device=dev, dtype=torch.bfloat16)
        else:
            b = torch.randn(n, hv, device=dev).bfloat16()
        A_log = torch.randn(hv, device=dev)
        dt_bias = torch.randn(hv, device=dev)
        pool = (torch.randn(n + 1, hv, V, K, device=dev) * 0.1).to(pool_dtype)
        idx = torch.randperm(n + 1, device=dev)[:n].int()

        dec_pool = pool.clone()
        dec_out = mixed.new_empty(n, 1, hv, V)
        fused_recurrent_gated_delta_rule_packed_decode(
            mixed, a, b, A_log, dt_bias, K**-0.5, dec_pool, dec_out, idx, True
        )
        q, k, v = torch.split(mixed, [h * K, h * K, hv * V], dim=-1)
        inter = pool.new_zeros(n, 1, hv, V, K)
        ver_out = fused_sigmoid_gating_delta_rule_update(
            A_log,
            a,
            dt_bias,
            1.0,
            20.0,
            q.view(1, n, h, K),
            k.view(1, n, h, K),
            v.view(1, n, hv, V),
            b,
            pool,
            idx,
            scale=K**-0.5,
            use_qk_l2norm_in_kernel=True,
            cu_seqlens=torch.arange(n + 1, device=dev, dtype=torch.int32),
            disable_state_update=True,
            intermediate_states_buffer=inter,
            intermediate_state_indices=torch.arange(n, device=dev, dtype=torch.int32),
            cache_steps=1,
        )
        torch.cuda.synchronize()
        d_out, v_out = dec_out.view(n, hv, V), ver_out.view(n, hv, V)
        d_st, v_st = dec_pool[idx.long()], inter[:, 0]
        rows.append(
            {
                "HV": hv,
                "N": n,
                "pool": pool_name,
                "b": regime,
                "out_equal": torch.equal(d_out, v_out),
                "out_unequal": int((d_out != v_out).sum()),
                "out_maxdiff": float((d_out.float() - v_out.float()).abs().max()),
                "state_equal": torch.equal(d_st, v_st),
                "state_unequal": int((d_st != v_st).sum()),
                "state_maxdiff": float((d_st.float() - v_st.float()).abs().max()),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--root", type=Path, default=Path("/tmp/gdn-parity-gpu"))
    parser.add_argument("--patches", type=int, default=2, help="the patched tree's prefix (2)")
    parser.add_argument("--worker", type=Path, help="internal: measure one tree")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.worker)))
        return

    series = load_series()
    trees = {
        "base": materialise_tree(series.prefix(0), args.root / "base"),
        "patched": materialise_tree(series.prefix(args.patches), args.root / "patched"),
    }
    results = {}
    for name, tree in trees.items():
        results[name] = run_worker(__file__, name, tree)
    env = gpu_env(patches=list(series.patches[: args.patches]))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "step0_parity.json").write_text(json.dumps({"env": env, **results}, indent=1))
    lines = [
        f"GPU {env['gpu']}, torch {env['torch']}, triton {env['triton']}",
        "",
        "| HV | N | pool | b | base: out equal | base: state equal "
        "| patched: out equal | patched: state equal |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for before, after in zip(results["base"], results["patched"], strict=True):

        def cell(row, key):
            if row[f"{key}_equal"]:
                return "yes"
            return f"no ({row[f'{key}_unequal']} el, max {row[f'{key}_maxdiff']:.3g})"

        lines.append(
            f"| {before['HV']} | {before['N']} | {before['pool']} | {before['b']} | "
            f"{cell(before, 'out')} | {cell(before, 'state')} | "
            f"{cell(after, 'out')} | {cell(after, 'state')} |"
        )
    (args.out / "step0_parity.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
