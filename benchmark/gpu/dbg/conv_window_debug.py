"""Which conv-window elements differ between verify and decode (fp16 act, bf16 state).

python benchmark/gpu/dbg/conv_window_debug.py TREE_0001_0004
"""

import sys
from pathlib import Path

import torch

from gdn_parity.sandbox.bare_import import import_sglang_from

import_sglang_from(Path(sys.argv[1]))
from sglang.kernels.ops.mamba.causal_conv1d_triton import causal_conv1d_update  # noqa: E402

WIDTH = 4
for seed, (act, st, (batch, dim, steps)) in [
    (11, (torch.float16, torch.bfloat16, (64, 10240, 8))),
    (9, (torch.float16, torch.bfloat16, (1, 2048, 2))),
]:
    torch.manual_seed(seed)
    weight = torch.randn(dim, WIDTH, device="cuda").to(act)
    x = (torch.randn(batch, dim, steps, device="cuda") * 3).to(act)
    state = (torch.randn(batch + 1, dim, WIDTH - 1, device="cuda") * 3).to(st)
    idx = torch.randperm(batch + 1, device="cuda")[:batch].int()
    v_state = state.clone()
    windows = torch.zeros(batch, steps, dim, WIDTH - 1, device="cuda", dtype=st)
    x0 = x.clone()
    v_out = causal_conv1d_update(
        x.clone(),
        v_state,
        weight,
        None,
        "silu",
        conv_state_indices=idx,
        intermediate_conv_window=windows,
        intermediate_state_indices=torch.arange(batch, device="cuda", dtype=torch.int32),
    )
    d_state = state.clone()
    for t in range(steps):
        causal_conv1d_update(
            x[..., t].clone(), d_state, weight, None, "silu", conv_state_indices=idx
        )
        w, d = windows[:, t], d_state[idx.long()]
        bad = (w.view(torch.int16) != d.view(torch.int16)).nonzero()
        if len(bad):
            print(f"seed {seed} step {t}: {len(bad)} elements differ; first 8:")
            for b, f, c in bad[:8].tolist():
                tok = t - (WIDTH - 2 - c)  # token index held in column c after step t
                xv = x0[b, f, tok].item() if 0 <= tok < steps else None
                cast = None if xv is None else torch.tensor(xv, dtype=act).to(st).item()
                print(
                    f"  b={b} f={f} col={c} token={tok} x={xv!r} x->state dtype={cast} "
                    f"verify={w[b, f, c].item()!r} decode={d[b, f, c].item()!r} "
                    f"initial_state={state[idx[b], f, :].tolist()}"
                )
    print(f"seed {seed}: x modified in place by the verify call? {not torch.equal(x, x0)}")
