"""Host-copy cost of SGLANG_GDN_STATE_TRACE per verify step, unfiltered and filtered.

Times the patched tree's ``GDNStateTrace`` on one simulated TARGET_VERIFY step of a
Qwen3.8-27B-like target (48 GDN layers, HV=48, K=V=128, fp32 SSM pool, bf16 conv
pool of 10240 x 3, D draft tokens): verify_input and the D verify_step snapshots
for every layer, then the post_commit of all layers. Rows: no filter, one layer
(SGLANG_GDN_STATE_TRACE_LAYERS), one request (SGLANG_GDN_STATE_TRACE_RIDS).

    python benchmark/gpu/state_trace_overhead.py --tree /tmp/gdn-parity-gpu/patched
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

LAYERS, HV, K, V, CONV_DIM, WIDTH = 48, 48, 128, 128, 10240, 4


def one_step(trace, n: int, d: int, pools: dict) -> None:
    import torch

    batch = SimpleNamespace(
        rids=[f"r{i}" for i in range(n)],
        positions=torch.arange(n * d, device="cuda") + 100,
        input_ids=torch.arange(n * d, device="cuda"),
    )
    slots = torch.arange(n, dtype=torch.int32, device="cuda")
    for layer in range(LAYERS):
        trace.trace_verify_input(layer, batch, pools["conv"], pools["ssm"], slots, d)
        trace.trace_verify_steps(
            layer, batch, pools["inter_ssm"], pools["inter_conv"], slots, slots, d
        )
    trace.trace_post_commit(
        list(range(LAYERS)),
        pools["ssm"][None].expand(LAYERS, *pools["ssm"].shape),
        pools["conv"][None].expand(LAYERS, *pools["conv"].shape),
        slots,
        torch.zeros(n, dtype=torch.long, device="cuda"),
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tree", type=Path, required=True)
    parser.add_argument("--requests", type=int, nargs="*", default=[1, 8])
    parser.add_argument("--draft-tokens", type=int, default=8)
    args = parser.parse_args()
    from gdn_parity.sandbox.bare_import import import_sglang_from

    import_sglang_from(args.tree)
    import torch
    from sglang.srt.layers.attention.linear.gdn_state_trace import GDNStateTrace

    d = args.draft_tokens
    print(f"GPU {torch.cuda.get_device_name()}; per verify step, {LAYERS} GDN layers, D={d}")
    print("| requests | filter | states copied | MiB copied | seconds |")
    print("|---|---|---|---|---|")
    for n in args.requests:
        pools = {
            "ssm": torch.randn(n, HV, V, K, device="cuda"),
            "conv": torch.randn(n, CONV_DIM, WIDTH - 1, device="cuda").bfloat16(),
            "inter_ssm": torch.randn(n, d, HV, V, K, device="cuda"),
            "inter_conv": torch.randn(n, d, CONV_DIM, WIDTH - 1, device="cuda").bfloat16(),
        }
        per_state = HV * V * K * 4 + CONV_DIM * (WIDTH - 1) * 2
        for label, layers, rids, traced in (
            ("none", None, None, LAYERS * n),
            ("layers=0", frozenset({0}), None, n),
            ("rids=r0", None, frozenset({"r0"}), LAYERS),
        ):
            with tempfile.TemporaryDirectory() as tmp:
                trace = GDNStateTrace(f"{tmp}/t.jsonl", {}, layers=layers, rids=rids)
                one_step(trace, n, d, pools)  # warm-up
                torch.cuda.synchronize()
                start = time.perf_counter()
                one_step(trace, n, d, pools)
                torch.cuda.synchronize()
                seconds = time.perf_counter() - start
                trace.close()
            states = traced * (d + 2)
            print(
                f"| {n} | {label} | {states} | {states * per_state / 2**20:.0f} | {seconds:.3f} |"
            )


if __name__ == "__main__":
    main()
