"""Cold-state CUDA-graph benchmark of GDN packed decode and target verify, for any tree.

One measurement = one CUDA graph of back-to-back launches (as many layers),
each on its own scattered slots of a pool several times the size of L2. A graph
holds at least ``MIN_LAUNCHES`` launches and enough of them that their slots
together are ``COLD_FACTOR`` x L2, so every launch of every replay reads and
writes cold state. The graph is replayed ``REPLAYS`` times; each replay's time /
launches is one sample; p10/p50/p90 are reported. The HBM floor is the bytes a
launch must move at the measured copy bandwidth.

Variants (each one a kernel of the tree, or of the 0.5.23 base tree):
- ``decode@base``: 0.5.23's packed decode; ``decode``: the tree's (its tile
  rule); ``decode-parity``: the tree's with ``exact_parity`` (the steps kernel);
  ``decode/bv=X``: the tree's with the value tile forced to X;
- ``verify-default``: ``fused_sigmoid_gating_delta_rule_update`` (target verify);
- ``verify-parity``: the exact-parity verify; ``verify-parity/bv=X`` forced tile.

    python benchmark/gpu/bench_packed.py --tree TREE --base-tree BASE --out OUT [--quick]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import torch

from gdn_parity.sandbox.bare_import import import_sglang_from
from gpu_common import copy_bandwidth, gpu_env, replay_samples

K = V = 128
MIN_LAUNCHES = 16
MAX_LAUNCHES = 512
COLD_FACTOR = 4
REPLAYS = 40
L2_BYTES = 50 << 20  # H200


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


class Layer:
    """Static inputs of one launch: N requests x T rows, scattered cold slots."""

    def __init__(self, pool, n, t, h, hv, slots):
        dev = "cuda"
        self.pool, self.n, self.t = pool, n, t
        rows = n * t
        self.mixed = torch.randn(rows, 2 * h * K + hv * V, device=dev).bfloat16()
        self.a = torch.randn(rows, hv, device=dev).bfloat16()
        self.b = torch.randn(rows, hv, device=dev).bfloat16()
        self.A_log = torch.randn(hv, device=dev)
        self.dt_bias = torch.randn(hv, device=dev)
        self.indices = slots.int()
        self.scratch = torch.arange(n, device=dev, dtype=torch.int32)
        self.cu = torch.arange(0, rows + 1, t, device=dev, dtype=torch.int32)
        self.out = self.mixed.new_empty(n, 1, hv, V)
        q, k, v = torch.split(self.mixed, [h * K, h * K, hv * V], dim=-1)
        self.q, self.k, self.v = (x.view(1, rows, -1, K) for x in (q, k, v))


def measure(fns) -> list[float]:
    for fn in fns:
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for fn in fns:
            fn()
    return replay_samples(graph, len(fns), REPLAYS)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tree", type=Path, required=True)
    p.add_argument("--base-tree", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--tag", default="")
    p.add_argument("--hv", default="48,12")
    p.add_argument("--pools", default="bfloat16,float32")
    p.add_argument("--n", default="1,2,4,8,16,32,64,128")
    p.add_argument("--t", default="2,4,8")
    p.add_argument("--tiles", default="4,8,16,32")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    import_sglang_from(args.tree)
    from sglang.kernels.ops.attention.fla import fused_recurrent as fr
    from sglang.kernels.ops.attention.linear.fused_sigmoid_gating_recurrent import (
        fused_sigmoid_gating_delta_rule_update,
    )

    spec = importlib.util.spec_from_file_location(
        "base_fused_recurrent",
        args.base_tree / "python/sglang/kernels/ops/attention/fla/fused_recurrent.py",
    )
    base = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(base)

    rule = fr._packed_block_v
    verify_parity = fr.fused_recurrent_gated_delta_rule_packed_verify

    def forced(bv):
        return lambda *a, **k: bv

    bandwidth = copy_bandwidth()
    rows = []
    started = time.time()
    for hv in map(int, args.hv.split(",")):
        h = hv // 3
        for pool_name in args.pools.split(","):
            dtype = getattr(torch, pool_name)
            slot_bytes = hv * V * K * dtype.itemsize
            for n in map(int, args.n.split(",")):
                for t in map(int, args.t.split(",")):
                    launches = -(-COLD_FACTOR * L2_BYTES // (n * slot_bytes))
                    launches = min(MAX_LAUNCHES, max(MIN_LAUNCHES, launches))
                    slots_needed = max(launches * n, COLD_FACTOR * L2_BYTES // slot_bytes + 1)
                    pool = (torch.randn(slots_needed, hv, V, K, device="cuda") * 0.1).to(dtype)
                    perm = torch.randperm(slots_needed, device="cuda")
                    layers = [
                        Layer(pool, n, t, h, hv, perm[(i * n) % (slots_needed - n) :][:n])
                        for i in range(launches)
                    ]
                    inter = pool.new_empty(n, t, hv, V, K)
                    L0 = layers[0]
                    variants = {}
                    if t == int(args.t.split(",")[0]):
                        variants["decode@base"] = [
                            (lambda L=L: base.fused_recurrent_gated_delta_rule_packed_decode(
                                L.mixed[: L.n], L.a[: L.n], L.b[: L.n], L.A_log, L.dt_bias,
                                K**-0.5, L.pool, L.out, L.indices, use_qk_l2norm_in_kernel=True))
                            for L in layers
                        ]  # fmt: skip
                        variants["decode-parity"] = [
                            (lambda L=L: fr.fused_recurrent_gated_delta_rule_packed_decode(
                                L.mixed[: L.n], L.a[: L.n], L.b[: L.n], L.A_log, L.dt_bias,
                                K**-0.5, L.pool, L.out, L.indices,
                                use_qk_l2norm_in_kernel=True, exact_parity=True))
                            for L in layers
                        ]  # fmt: skip
                        for bv in [None] + [int(x) for x in args.tiles.split(",")]:
                            name = "decode" if bv is None else f"decode/bv={bv}"
                            variants[name] = (bv, [
                                (lambda L=L: fr.fused_recurrent_gated_delta_rule_packed_decode(
                                    L.mixed[: L.n], L.a[: L.n], L.b[: L.n], L.A_log, L.dt_bias,
                                    K**-0.5, L.pool, L.out, L.indices,
                                    use_qk_l2norm_in_kernel=True))
                                for L in layers
                            ])  # fmt: skip
                    variants["verify-default"] = [
                        (lambda L=L, buf=inter: fused_sigmoid_gating_delta_rule_update(
                            A_log=L.A_log, a=L.a, dt_bias=L.dt_bias, softplus_beta=1.0,
                            softplus_threshold=20.0, q=L.q, k=L.k, v=L.v, b=L.b,
                            initial_state_source=L.pool, initial_state_indices=L.indices,
                            use_qk_l2norm_in_kernel=True, cu_seqlens=L.cu,
                            disable_state_update=True, intermediate_states_buffer=buf,
                            intermediate_state_indices=L.scratch, cache_steps=L.t))
                        for L in layers
                    ]  # fmt: skip
                    for bv in [None] + [int(x) for x in args.tiles.split(",")]:
                        name = "verify-parity" if bv is None else f"verify-parity/bv={bv}"
                        variants[name] = (bv, [
                            (lambda L=L, buf=inter: verify_parity(
                                L.mixed, L.a, L.b, L.A_log, L.dt_bias, K**-0.5, L.pool, buf,
                                L.indices, L.scratch, num_steps=L.t,
                                use_qk_l2norm_in_kernel=True))
                            for L in layers
                        ])  # fmt: skip
                    for name, v in variants.items():
                        bv, fns = v if isinstance(v, tuple) else (None, v)
                        fr._packed_block_v = rule if bv is None else forced(bv)
                        try:
                            samples = measure(fns)
                        finally:
                            fr._packed_block_v = rule
                        steps = 1 if name.startswith("decode") else t
                        moved = (
                            n * slot_bytes * (2 if steps == 1 else 1 + steps)
                            + n * steps * (2 * h * K + 2 * hv * V + 2 * hv) * 2
                        )
                        rows.append({
                            "hv": hv, "pool": pool_name, "n": n, "t": steps, "variant": name,
                            "launches": len(fns),
                            "block_v": None if name in ("decode@base", "verify-default")
                            else bv or rule(L0.mixed, pool, n),
                            "p10": pct(samples, 0.1), "p50": pct(samples, 0.5),
                            "p90": pct(samples, 0.9), "floor_us": moved / bandwidth * 1e6,
                        })  # fmt: skip
                    del pool, layers, inter
                    torch.cuda.empty_cache()
            print(f"[{time.time() - started:6.1f}s] hv={hv} pool={pool_name}", flush=True)
    env = gpu_env(
        copy_bandwidth_GBps=bandwidth / 1e9,
        launches_per_graph=f"{MIN_LAUNCHES}..{MAX_LAUNCHES}, slots >= {COLD_FACTOR} x L2",
        replays=REPLAYS,
    )
    name = f"bench{args.tag}.json"
    (args.out / name).write_text(json.dumps({"env": env, "rows": rows}, indent=0))
    print(json.dumps(env))
    for r in rows:
        if "/" not in r["variant"]:
            print(
                f"hv={r['hv']} {r['pool']} n={r['n']} t={r['t']} {r['variant']}: "
                f"p50 {r['p50']:.2f} us (p10 {r['p10']:.2f}, p90 {r['p90']:.2f}) "
                f"floor {r['floor_us']:.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
