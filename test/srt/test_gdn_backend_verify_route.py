"""The real ``GDNAttnBackend.forward_extend`` target-verify branch, with the flag on and off.

The backend comes from ``backend_rig`` (real sglang objects and tensors, no
``__init__``). The reference is Base decode of the same rows, one token at a
time: sglang's single-token ``causal_conv1d_update`` then packed decode.
"""

from __future__ import annotations

import pytest
import torch

from backend_rig import BackendRig, Shape, make_layer

S = Shape(n=2, d=3, h=2, hv=4, k=16, v=16)
INDICES = torch.tensor([2, 0], dtype=torch.int32)


@pytest.fixture
def batch():
    gen = torch.Generator().manual_seed(11)
    layer = make_layer(0, S, gen, "cpu")
    conv = torch.randn(S.n + 1, S.conv_dim, S.w - 1, generator=gen).to(torch.bfloat16)
    ssm = (torch.randn(S.n + 1, S.hv, S.v, S.k, generator=gen) * 0.1).to(torch.bfloat16)
    x = torch.randn(S.n * S.d, S.conv_dim, generator=gen).to(torch.bfloat16)
    a = torch.randn(S.n * S.d, S.hv, generator=gen).to(torch.bfloat16)
    b = torch.randn(S.n * S.d, S.hv, generator=gen).to(torch.bfloat16)
    return layer, (conv, ssm), x, a, b


def _verify(flag, layer, pools, x, a, b):
    rig = BackendRig([0], S, S.n + 1, INDICES, torch.bfloat16, "cpu", exact_parity=flag)
    rig.state.conv[0][0].copy_(pools[0])
    rig.state.temporal[0].copy_(pools[1])
    positions = torch.arange(S.n * S.d)
    out = rig.verify(
        layer, x, a, b, ["r0", "r1"], positions, torch.zeros(S.n * S.d, dtype=torch.long)
    )
    return out, rig.state


def _decode(layer, pools, x, a, b):
    """Base decode: conv update and packed decode, one token at a time."""
    from sglang.kernels.ops.attention.fla.fused_recurrent import (
        fused_recurrent_gated_delta_rule_packed_decode,
    )
    from sglang.kernels.ops.mamba.causal_conv1d_triton import causal_conv1d_update

    conv, ssm = (p.clone() for p in pools)
    outs, states, windows = [], [], []
    for t in range(S.d):
        rows = torch.arange(S.n) * S.d + t
        mixed = causal_conv1d_update(
            x[rows].contiguous(), conv, layer.conv_weights, layer.bias, layer.activation,
            conv_state_indices=INDICES,
        )  # fmt: skip
        out = torch.empty(S.n, 1, S.hv, S.v, dtype=x.dtype)
        fused_recurrent_gated_delta_rule_packed_decode(
            mixed, a[rows].contiguous(), b[rows].contiguous(), layer.A_log, layer.dt_bias,
            S.k**-0.5, ssm, out, INDICES, use_qk_l2norm_in_kernel=True,
        )  # fmt: skip
        outs.append(out.view(S.n, S.hv, S.v))
        states.append(ssm[INDICES.long()].clone())
        windows.append(conv[INDICES.long()].clone())
    return torch.stack(outs, 1), torch.stack(states, 1), torch.stack(windows, 1)


def test_flag_on_verify_equals_base_decode(sglang_tree, batch):
    layer, pools, x, a, b = batch
    out, state = _verify(True, layer, pools, x, a, b)
    ref_out, ref_states, ref_windows = _decode(layer, pools, x, a, b)
    assert torch.equal(out, ref_out)
    assert torch.equal(state.intermediate_ssm[0, : S.n], ref_states)
    assert torch.equal(state.temporal[0], pools[1]), "verify must not write the persistent SSM pool"
    # The conv window verify saves for step t is decode's conv state after step t.
    assert torch.equal(state.intermediate_conv_window[0][0, : S.n], ref_windows)


def test_flag_off_takes_the_default_kernel_which_drifts(sglang_tree, batch):
    layer, pools, x, a, b = batch
    _, state = _verify(False, layer, pools, x, a, b)
    _, ref_states, _ = _decode(layer, pools, x, a, b)
    assert not torch.equal(state.intermediate_ssm[0, : S.n], ref_states)
