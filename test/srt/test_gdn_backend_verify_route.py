"""The real ``GDNAttnBackend.forward_extend`` target-verify branch, with the flag on and off.

The backend object is made without ``__init__`` (which needs a ModelRunner and a
GPU pool); every attribute the target-verify branch reads is set to a real
sglang object or a real tensor: the kernel dispatcher, forward metadata, the
``MambaPool.SpeculativeState`` holding conv/SSM pools and the verify scratch.
The reference is Base decode of the same rows, one token at a time: sglang's
single-token ``causal_conv1d_update`` then packed decode.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

N, D, H, HV, K, V, W = 2, 3, 2, 4, 16, 16, 4
CONV_DIM = 2 * H * K + HV * V


def _layer(gen):
    return SimpleNamespace(
        layer_id=0,
        conv_weights=(torch.randn(CONV_DIM, W, generator=gen) * 0.5).to(torch.bfloat16),
        bias=None,
        activation="silu",
        A_log=torch.randn(HV, generator=gen),
        dt_bias=torch.randn(HV, generator=gen),
        head_q_dim=K,
        head_k_dim=K,
        head_v_dim=V,
        num_q_heads=H,
        num_k_heads=H,
        num_v_heads=HV,
        q_dim=H * K,
        k_dim=H * K,
        v_dim=HV * V,
    )


def _verify(flag, layer, pools, indices, x, a, b):
    """Run forward_extend for one TARGET_VERIFY batch; return output and scratch."""
    from sglang.srt.layers.attention.linear.gdn_backend import (
        GDNAttnBackend,
        GDNKernelDispatcher,
    )
    from sglang.srt.layers.attention.linear.utils import LinearAttnKernelBackend
    from sglang.srt.layers.attention.mamba.mamba2_metadata import ForwardMetadata
    from sglang.srt.mem_cache.memory_pool import MambaPool
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    conv, ssm = (p.clone() for p in pools)
    slots = ssm.shape[0]
    state = MambaPool.SpeculativeState(
        conv=[conv],
        temporal=ssm,
        intermediate_ssm=ssm.new_zeros(slots + 1, D, HV, V, K),
        intermediate_conv_window=[conv.new_zeros(slots + 1, D, CONV_DIM, W - 1)],
    )
    triton = LinearAttnKernelBackend.TRITON
    backend = GDNAttnBackend.__new__(GDNAttnBackend)
    backend.kernel_dispatcher = GDNKernelDispatcher(triton, triton, triton)
    backend.verify_exact_parity = flag
    backend.mis_metadata = None
    backend._use_strided_target_verify_qkv = True
    # Request slot i owns scratch row i (build_verify_intermediate_state_indices
    # sizes this from the runtime's batch limits, which a unit test has not published).
    backend.verify_intermediate_state_indices = torch.arange(slots + 1, dtype=torch.int32)
    backend.req_to_token_pool = SimpleNamespace(
        size=slots, mamba_pool=SimpleNamespace(), mamba2_layer_cache=lambda layer_id: state
    )
    backend.forward_metadata = ForwardMetadata(
        query_start_loc=torch.arange(0, N * D + 1, D, dtype=torch.int32),
        mamba_cache_indices=indices,
        is_target_verify=True,
        draft_token_num=D,
    )
    batch = SimpleNamespace(
        forward_mode=ForwardMode.TARGET_VERIFY,
        spec_info=SimpleNamespace(draft_token_num=D),
        req_pool_indices=torch.arange(N),
    )
    out = backend.forward_extend(layer, batch, mixed_qkv=x, a=a, b=b)
    return out.view(N, D, HV, V), state, (conv, ssm)


def _decode(layer, pools, indices, x, a, b):
    """Base decode: conv update and packed decode, one token at a time."""
    from sglang.kernels.ops.attention.fla.fused_recurrent import (
        fused_recurrent_gated_delta_rule_packed_decode,
    )
    from sglang.kernels.ops.mamba.causal_conv1d_triton import causal_conv1d_update

    conv, ssm = (p.clone() for p in pools)
    outs, states, windows = [], [], []
    for t in range(D):
        rows = torch.arange(N) * D + t
        mixed = causal_conv1d_update(
            x[rows].contiguous(), conv, layer.conv_weights, layer.bias, layer.activation,
            conv_state_indices=indices,
        )  # fmt: skip
        out = torch.empty(N, 1, HV, V, dtype=x.dtype)
        fused_recurrent_gated_delta_rule_packed_decode(
            mixed, a[rows].contiguous(), b[rows].contiguous(), layer.A_log, layer.dt_bias,
            K**-0.5, ssm, out, indices, use_qk_l2norm_in_kernel=True,
        )  # fmt: skip
        outs.append(out.view(N, HV, V))
        states.append(ssm[indices.long()].clone())
        windows.append(conv[indices.long()].clone())
    return torch.stack(outs, 1), torch.stack(states, 1), torch.stack(windows, 1)


@pytest.fixture
def batch():
    gen = torch.Generator().manual_seed(11)
    layer = _layer(gen)
    conv = torch.randn(N + 1, CONV_DIM, W - 1, generator=gen).to(torch.bfloat16)
    ssm = (torch.randn(N + 1, HV, V, K, generator=gen) * 0.1).to(torch.bfloat16)
    indices = torch.tensor([2, 0], dtype=torch.int32)
    x = torch.randn(N * D, CONV_DIM, generator=gen).to(torch.bfloat16)
    a = torch.randn(N * D, HV, generator=gen).to(torch.bfloat16)
    b = torch.randn(N * D, HV, generator=gen).to(torch.bfloat16)
    return layer, (conv, ssm), indices, x, a, b


def test_flag_on_verify_equals_base_decode(sglang_tree, batch):
    layer, pools, indices, x, a, b = batch
    out, state, (conv, ssm) = _verify(True, layer, pools, indices, x, a, b)
    ref_out, ref_states, ref_windows = _decode(layer, pools, indices, x, a, b)
    assert torch.equal(out, ref_out)
    assert torch.equal(state.intermediate_ssm[:N], ref_states)
    assert torch.equal(ssm, pools[1]), "verify must not write the persistent SSM pool"
    # The conv window verify saves for step t is decode's conv state after step t.
    assert torch.equal(state.intermediate_conv_window[0][:N], ref_windows)


def test_flag_off_takes_the_default_kernel_which_drifts(sglang_tree, batch):
    layer, pools, indices, x, a, b = batch
    _, state, _ = _verify(False, layer, pools, indices, x, a, b)
    _, ref_states, _ = _decode(layer, pools, indices, x, a, b)
    assert not torch.equal(state.intermediate_ssm[:N], ref_states)
