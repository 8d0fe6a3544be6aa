"""--gdn-verify-exact-parity on a GPU: the bitwise table and the verify-step benchmark.

Table: for D, N, HV and the SSM pool dtype, run the parity verify (captured in a
CUDA graph and replayed) and, for contrast, the default verify kernel
(``fused_sigmoid_gating_delta_rule_update``, also graphed) on the same rows and
committed state, and compare with packed decode fed one token at a time:
outputs and per-step state snapshots, with ``torch.equal``. Then commit random
accepted lengths through the real scatter kernel and compare the pool with
decode's state.

Benchmark: CUDA-graph replay medians of one GDN layer's verify step, default vs
parity, with the HBM floor (bytes the step must move / measured copy bandwidth).

    PYTHONPATH=python python benchmark/gpu/verify_parity.py --tree TREE --out DIR

TREE is a tree of the series (``gdn-parity tree TREE``); the reference is
``gdn_parity.drift.reference``, the one the CPU tests use.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from pathlib import Path

import torch

from gdn_parity.drift.reference import decode_token_by_token
from gdn_parity.sandbox.bare_import import import_sglang_from
from gpu_common import copy_bandwidth, gpu_env, replay_samples

K = V = 128
TABLE_D = (2, 4, 8)
TABLE_N = (1, 8, 64, 128)
TABLE_HV = (16, 48)
POOLS = ("bfloat16", "float16", "float32")
BENCH_N = (1, 8, 32, 64, 128)
BENCH_D = (2, 4, 8)
BENCH_POOLS = ("bfloat16", "float32")
BENCH_HV, BENCH_H = 48, 16  # Qwen3.5/3.8-27B GDN layer at TP1


def kernels():
    from sglang.kernels.ops.attention.fla.fused_recurrent import (
        fused_recurrent_gated_delta_rule_packed_decode,
        fused_recurrent_gated_delta_rule_packed_verify,
    )
    from sglang.kernels.ops.attention.linear.fused_sigmoid_gating_recurrent import (
        fused_sigmoid_gating_delta_rule_update,
    )
    from sglang.kernels.ops.mamba.mamba_state_scatter_triton import (
        fused_mamba_state_scatter_with_mask,
    )

    return (
        fused_recurrent_gated_delta_rule_packed_decode,
        fused_recurrent_gated_delta_rule_packed_verify,
        fused_sigmoid_gating_delta_rule_update,
        fused_mamba_state_scatter_with_mask,
    )


class Case:
    """Static buffers of one verify step: N requests x D draft tokens of one layer."""

    def __init__(self, n, d, h, hv, pool_dtype, padded):
        self.n, self.d, self.h, self.hv = n, d, h, hv
        dev = "cuda"
        self.mixed = torch.randn(n * d, 2 * h * K + hv * V, device=dev).bfloat16()
        self.a = torch.randn(n * d, hv, device=dev).bfloat16()
        self.b = torch.randn(n * d, hv, device=dev).bfloat16()
        self.A_log = torch.randn(hv, device=dev)
        self.dt_bias = torch.randn(hv, device=dev)
        self.pool = (torch.randn(n + 2, hv, V, K, device=dev) * 0.1).to(pool_dtype)
        self.indices = torch.randperm(n + 2, device=dev)[:n].int()
        if padded and n > 1:
            self.indices[n // 2] = -1
        self.scratch = torch.arange(n, device=dev, dtype=torch.int32)
        self.cu = torch.arange(0, n * d + 1, d, device=dev, dtype=torch.int32)
        self.inter = self.pool.new_zeros(n, d, hv, V, K)
        q, k, v = torch.split(self.mixed, [h * K, h * K, hv * V], dim=-1)
        self.q = q.view(1, n * d, h, K)
        self.k = k.view(1, n * d, h, K)
        self.v = v.view(1, n * d, hv, V)

    def parity(self):
        verify = kernels()[1]
        return verify(
            self.mixed, self.a, self.b, self.A_log, self.dt_bias, K**-0.5, self.pool,
            self.inter, self.indices, self.scratch, num_steps=self.d,
            use_qk_l2norm_in_kernel=True,
        )  # fmt: skip

    def default(self):
        update = kernels()[2]
        return update(
            A_log=self.A_log, a=self.a, dt_bias=self.dt_bias, softplus_beta=1.0,
            softplus_threshold=20.0, q=self.q, k=self.k, v=self.v, b=self.b,
            initial_state_source=self.pool, initial_state_indices=self.indices,
            use_qk_l2norm_in_kernel=True, cu_seqlens=self.cu, disable_state_update=True,
            intermediate_states_buffer=self.inter, intermediate_state_indices=self.scratch,
            cache_steps=self.d,
        )  # fmt: skip

    def decode_reference(self):
        """Packed decode token by token from a copy of the committed pool."""
        ref = decode_token_by_token(
            self.mixed, self.a, self.b, self.A_log, self.dt_bias, self.pool.clone(),
            self.indices, self.d,
        )  # fmt: skip
        return ref.outputs, ref.states


def graphed(fn, calls=1):
    out = fn()  # compile and warm up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            out = fn()
    return graph, out


def table_row(n, d, hv, pool_name):
    h = hv // 3 if hv % 3 == 0 else hv // 2
    case = Case(n, d, h, hv, getattr(torch, pool_name), padded=True)
    valid = case.indices >= 0
    ref_out, ref_states = case.decode_reference()
    row = {"D": d, "N": n, "HV": hv, "H": h, "pool": pool_name}
    for name, fn in (("default", case.default), ("parity", case.parity)):
        committed = case.pool.clone()
        case.inter.zero_()
        graph, out = graphed(fn)
        case.inter.zero_()
        graph.replay()
        torch.cuda.synchronize()
        out = out.view(case.n, d, hv, V)
        row[f"{name}_out_equal"] = bool(torch.equal(out[valid], ref_out[valid]))
        row[f"{name}_state_equal"] = bool(torch.equal(case.inter[valid], ref_states[valid]))
        row[f"{name}_state_unequal_elems"] = int((case.inter[valid] != ref_states[valid]).sum())
        row[f"{name}_pool_untouched"] = bool(torch.equal(case.pool, committed))
    # Commit random accepted lengths from the parity snapshots with the real scatter.
    scatter = kernels()[3]
    accept = torch.randint(1, d + 1, (n,), device="cuda")
    scatter(case.pool[None], case.inter[None], case.indices, torch.where(valid, accept - 1, -1))
    torch.cuda.synchronize()
    committed_ok = all(
        torch.equal(case.pool[case.indices[i]], ref_states[i, accept[i] - 1])
        for i in torch.nonzero(valid).flatten().tolist()
    )
    row["parity_commit_equals_decode"] = committed_ok
    return row


def bench_row(n, d, pool_name, bandwidth, calls=20, replays=30):
    pool_dtype = getattr(torch, pool_name)
    case = Case(n, d, BENCH_H, BENCH_HV, pool_dtype, padded=False)
    row = {"N": n, "D": d, "pool": pool_name}
    for name, fn in (("default", case.default), ("parity", case.parity)):
        graph, _ = graphed(fn, calls)
        row[f"{name}_us"] = statistics.median(replay_samples(graph, calls, replays))
    state = BENCH_HV * V * K * pool_dtype.itemsize
    tokens = n * d
    moved = (
        n * state  # read the committed state
        + n * d * state  # write one snapshot per draft step
        + tokens * case.mixed.shape[1] * 2  # q/k/v rows
        + tokens * BENCH_HV * V * 2  # outputs
        + tokens * BENCH_HV * 2 * 2  # a, b
    )
    row["bytes"] = moved
    row["floor_us"] = moved / bandwidth * 1e6
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tree", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    import_sglang_from(args.tree)

    torch.manual_seed(0)
    table = [
        table_row(n, d, hv, pool)
        for d, n, hv, pool in itertools.product(TABLE_D, TABLE_N, TABLE_HV, POOLS)
    ]
    bandwidth = copy_bandwidth()
    bench = [
        bench_row(n, d, pool, bandwidth)
        for pool, d, n in itertools.product(BENCH_POOLS, BENCH_D, BENCH_N)
    ]
    env = gpu_env(copy_bandwidth_GBps=bandwidth / 1e9)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "verify_parity.json").write_text(
        json.dumps({"env": env, "table": table, "bench": bench}, indent=1)
    )
    yes = {True: "yes", False: "NO"}
    lines = [f"GPU {env['gpu']}, torch {env['torch']}, triton {env['triton']}", ""]
    lines += [
        "| D | N | HV | pool | parity: out | parity: states | parity: commit "
        "| default: out | default: states (unequal elems) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        lines.append(
            f"| {r['D']} | {r['N']} | {r['HV']} | {r['pool']} | {yes[r['parity_out_equal']]} "
            f"| {yes[r['parity_state_equal']]} | {yes[r['parity_commit_equals_decode']]} "
            f"| {yes[r['default_out_equal']]} | {yes[r['default_state_equal']]} "
            f"({r['default_state_unequal_elems']}) |"
        )
    lines += [
        "",
        f"Copy bandwidth {env['copy_bandwidth_GBps']:.0f} GB/s. HV={BENCH_HV}, H={BENCH_H}, "
        f"K=V={K}; CUDA-graph replay medians per verify call (us).",
        "",
        "| pool | D | N | default us | parity us | parity/default | HBM floor us | parity/floor |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in bench:
        lines.append(
            f"| {r['pool']} | {r['D']} | {r['N']} | {r['default_us']:.2f} | "
            f"{r['parity_us']:.2f} | {r['parity_us'] / r['default_us']:.2f} | "
            f"{r['floor_us']:.2f} | {r['parity_us'] / r['floor_us']:.2f} |"
        )
    (args.out / "verify_parity.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
