"""Verify's multi-token conv vs decode's one-token convs on a GPU, per conv-state dtype.

For each activation dtype (bf16, fp16; the weights share it) and conv-state dtype
(bf16, fp16, fp32), feed the same D draft tokens and committed state to
``causal_conv1d_update`` once with D tokens and per-step windows (TARGET_VERIFY)
and D times with one token (decode), and compare every step's output and window
bit for bit (``torch.equal`` on integer views, so equal NaNs compare equal). Decode's own
outputs and states are hashed, so the table also says whether 0005 left decode
unchanged (decode is the same kernel call before and after). The two columns
are two trees of the series (``gdn-parity tree``, then a worktree at a prefix):
before patch 0005 and with it:

    python benchmark/gpu/conv_parity.py --before TREE_0003 --after TREE_0004 --out DIR
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
from pathlib import Path

from gpu_common import gpu_env, run_worker

ACT_DTYPES = ("bfloat16", "float16")
STATE_DTYPES = ("bfloat16", "float16", "float32")
SHAPES = ((1, 2048, 2), (8, 8192, 4), (64, 10240, 8))  # (batch, conv dim, D)
WIDTH = 4


def verify_and_decode(update, seed: int, act_dtype, state_dtype, batch: int, dim: int, steps: int):
    """One case: ``steps`` tokens through ``update`` (``causal_conv1d_update``) once as
    TARGET_VERIFY does (per-step windows) and one at a time as decode does.

    Returns the inputs (x, state, idx), verify's (outputs, windows) and decode's per-step
    (outputs, stored windows)."""
    import torch

    torch.manual_seed(seed)
    weight = torch.randn(dim, WIDTH, device="cuda").to(act_dtype)
    x = (torch.randn(batch, dim, steps, device="cuda") * 3).to(act_dtype)
    state = (torch.randn(batch + 1, dim, WIDTH - 1, device="cuda") * 3).to(state_dtype)
    idx = torch.randperm(batch + 1, device="cuda")[:batch].int()
    windows = torch.zeros(batch, steps, dim, WIDTH - 1, device="cuda", dtype=state_dtype)
    v_out = update(
        x.clone(),
        state.clone(),
        weight,
        None,
        "silu",
        conv_state_indices=idx,
        intermediate_conv_window=windows,
        intermediate_state_indices=torch.arange(batch, device="cuda", dtype=torch.int32),
    )
    d_state = state.clone()
    d_outs, d_windows = [], []
    for t in range(steps):
        d_outs.append(
            update(x[..., t].clone(), d_state, weight, None, "silu", conv_state_indices=idx)
        )
        d_windows.append(d_state[idx.long()].clone())
    return (x, state, idx), (v_out, windows), (d_outs, d_windows)


def bits(x):
    """Bit patterns, so that equal NaNs compare equal."""
    import torch

    return x.contiguous().view({2: torch.int16, 4: torch.int32}[x.element_size()])


def measure(tree: Path) -> list[dict]:
    from gdn_parity.sandbox.bare_import import import_sglang_from

    import_sglang_from(tree)
    import torch
    from sglang.kernels.ops.mamba.causal_conv1d_triton import causal_conv1d_update

    rows = []
    for seed, (act_name, state_name, (batch, dim, steps)) in enumerate(
        itertools.product(ACT_DTYPES, STATE_DTYPES, SHAPES)
    ):
        act_dtype, state_dtype = getattr(torch, act_name), getattr(torch, state_name)
        _, (v_out, windows), (d_outs, d_windows) = verify_and_decode(
            causal_conv1d_update, seed, act_dtype, state_dtype, batch, dim, steps
        )
        out_equal, win_equal, max_diff = [], [], 0.0
        decode_hash = hashlib.sha256()
        for t, (d_out, d_win) in enumerate(zip(d_outs, d_windows, strict=True)):
            decode_hash.update(d_out.cpu().view(torch.uint8).numpy().tobytes())
            out_equal.append(torch.equal(bits(v_out[..., t]), bits(d_out)))
            win_equal.append(torch.equal(bits(windows[:, t]), bits(d_win)))
            max_diff = max(max_diff, (v_out[..., t].float() - d_out.float()).abs().max().item())
        decode_hash.update(d_windows[-1].cpu().view(torch.uint8).numpy().tobytes())
        rows.append(
            {
                "act": act_name,
                "state": state_name,
                "batch": batch,
                "dim": dim,
                "D": steps,
                "out_equal_steps": f"{sum(out_equal)}/{steps}",
                "window_equal_steps": f"{sum(win_equal)}/{steps}",
                "max_abs_out_diff": max_diff,
                "decode_sha256": decode_hash.hexdigest(),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", type=Path, help="tree: the series up to 0004")
    parser.add_argument("--after", type=Path, help="tree: the series up to 0005")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--worker", type=Path, help="internal: measure one tree")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.worker)))
        return
    if not (args.before and args.after and args.out):
        parser.error("give --before, --after and --out")

    before, after = args.before, args.after
    results = {}
    for name, tree in (("before", before), ("after", after)):
        results[name] = run_worker(__file__, name, tree)
    env = gpu_env()
    lines = [
        f"GPU {env['gpu']}, torch {env['torch']}, triton {env['triton']}",
        "before = base + 0001..0003; after = base + 0001..0004",
        "",
        "| act | conv state | batch | dim | D | before: out equal | before: windows equal "
        "| before: max abs diff | after: out equal | after: windows equal | after: max abs diff "
        "| decode unchanged by 0005 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for b, a in zip(results["before"], results["after"], strict=True):
        same = "yes" if b["decode_sha256"] == a["decode_sha256"] else "**no**"
        lines.append(
            f"| {b['act']} | {b['state']} | {b['batch']} | {b['dim']} | {b['D']} "
            f"| {b['out_equal_steps']} | {b['window_equal_steps']} | {b['max_abs_out_diff']:.3g} "
            f"| {a['out_equal_steps']} | {a['window_equal_steps']} | {a['max_abs_out_diff']:.3g} "
            f"| {same} |"
        )
    holds = all(
        r["out_equal_steps"] == r["window_equal_steps"] == f"{r['D']}/{r['D']}"
        for r in results["after"]
    )
    unchanged = all(
        b["decode_sha256"] == a["decode_sha256"]
        for b, a in zip(results["before"], results["after"], strict=True)
    )
    lines += [
        "",
        f"conv parity after 0005: {'HOLDS' if holds else 'BROKEN'} for every dtype pair",
        f"decode conv unchanged by 0005: {'YES' if unchanged else 'NO'}",
    ]
    table = "\n".join(lines)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "conv_parity.json").write_text(json.dumps({"env": env, **results}, indent=1))
    (args.out / "conv_parity.md").write_text(table + "\n")
    print(table)
    sys.exit(0 if holds and unchanged else 1)


if __name__ == "__main__":
    main()
