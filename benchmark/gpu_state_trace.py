"""The GDN state trace (patch 0001) through the real backends on CUDA, commit included.

Two GDN layers of the real ``GDNAttnBackend`` (``test/srt/backend_rig.py``) serve
three requests, one of them a padded row. A Base run decodes positions 0..T-1;
a speculative run verifies D rows per round and commits a random accepted
length per request through the real
``HybridLinearAttnBackend.update_mamba_state_after_mtp_verify`` (sglang's
scatter kernels). Both runs carry ``GDNStateTrace``. Checked, with and without
``--gdn-verify-exact-parity``:

* every ``post_commit`` record digests the pool slot as it is after the commit;
* ``trace-diff`` finds no divergence with the flag and one without it.

    python benchmark/gpu_state_trace.py TREE OUT_DIR
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "python"), str(ROOT / "test" / "srt")]


def _sha(t) -> str:
    import torch

    raw = t.contiguous().view(torch.int16) if t.dtype == torch.bfloat16 else t.contiguous()
    return hashlib.sha256(raw.cpu().numpy().tobytes()).hexdigest()


def run(exact_parity: bool, out: Path) -> dict:
    import torch
    from sglang.srt.layers.attention.linear.gdn_state_trace import GDNStateTrace

    from backend_rig import BackendRig, Shape, make_layer
    from gdn_parity.trace_diff import diff_traces, read_trace

    s, steps, dev = Shape(n=3, d=3, h=4, hv=8, k=128, v=128), 24, "cuda"
    indices = torch.tensor([3, -1, 1], dtype=torch.int32, device=dev)
    rids = ["r0", "pad", "r2"]
    gen = torch.Generator().manual_seed(7)
    layers = [make_layer(i, s, gen, dev) for i in (0, 4)]
    conv0 = torch.randn(2, 5, s.conv_dim, s.w - 1, generator=gen).bfloat16().to(dev)
    ssm0 = (torch.randn(2, 5, s.hv, s.v, s.k, generator=gen) * 0.1).bfloat16().to(dev)
    rows = {
        name: torch.randn(steps + s.d, s.n, dim, generator=gen).bfloat16().to(dev)
        for name, dim in (("x", s.conv_dim), ("a", s.hv), ("b", s.hv))
    }
    tag = "parity" if exact_parity else "default"

    def rig(name):
        trace = GDNStateTrace(str(out / f"{tag}-{name}.jsonl"), {"model": "rig"})
        r = BackendRig([0, 4], s, 5, indices, torch.bfloat16, dev, exact_parity=exact_parity,
                       state_trace=trace)  # fmt: skip
        r.state.conv[0].copy_(conv0)
        r.state.temporal.copy_(ssm0)
        return r, trace

    base, base_trace = rig("base")
    for p in range(steps):
        pos = torch.full((s.n,), p, device=dev)
        for layer in layers:
            base.decode(layer, rows["x"][p], rows["a"][p], rows["b"][p], rids, pos, pos)
    base_trace.close()

    spec, spec_trace = rig("spec")
    start = [0] * s.n
    commit_checks = 0
    while max(start) + s.d <= steps:
        pos = torch.tensor([[p + t for t in range(s.d)] for p in start], device=dev)
        take = {k: v[pos, torch.arange(s.n, device=dev)[:, None]].reshape(s.n * s.d, -1)
                for k, v in rows.items()}  # fmt: skip
        flat = pos.reshape(-1)
        for layer in layers:
            spec.verify(layer, take["x"], take["a"], take["b"], rids, flat, flat)
        accept = torch.randint(1, s.d + 1, (s.n,), generator=gen)
        steps_idx = torch.where(indices.cpu() >= 0, accept - 1, -1).to(dev)
        spec.commit(steps_idx)
        spec_trace._file.flush()
        records = [json.loads(x) for x in (out / f"{tag}-spec.jsonl").read_text().splitlines()]
        for r in records[-2 * 2 :]:  # the last commit: two requests x two layers
            slot = indices[rids.index(r["rid"])].item()
            pool = spec.state.temporal[[0, 4].index(r["layer"]), slot]
            assert r["checkpoint"] == "post_commit" and r["ssm"]["sha256"] == _sha(pool), r
            commit_checks += 1
        start = [p + int(a) for p, a in zip(start, accept, strict=True)]
    spec_trace.close()
    diff = diff_traces(read_trace(out / f"{tag}-base.jsonl"), read_trace(out / f"{tag}-spec.jsonl"))
    first = diff.first.record if diff.first else None
    return {
        "exact_parity": exact_parity,
        "compared": len(diff.compared),
        "post_commit_checked": commit_checks,
        "first_divergence": None
        if first is None
        else f"pos {first['pos']} layer {first['layer']} {first['checkpoint']}",
        "ok": (first is None) == exact_parity and commit_checks > 0,
    }


def main() -> int:
    from gdn_parity.bare_import import import_sglang_from

    tree, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    import_sglang_from(tree)
    results = [run(False, out), run(True, out)]
    (out / "state_trace.json").write_text(json.dumps(results, indent=1))
    for r in results:
        print(r)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
