"""Patch 0002: every GDN site computes the same g and beta (CPU, Triton interpreter).

The sites are the real kernels of the patched tree: packed decode, the GDN path
of the target-verify kernel, prefill gating, and the ReplaySSM decode and spec
kernels. Decode, verify and ReplaySSM decode are read through the stored state
(see ``gdn_probes.py``); prefill gating returns g and beta, and the ReplaySSM
spec kernel stores them in its ring.
"""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from helpers.gdn_probes import probe_rows, random_gate_inputs, read_probe

DTYPES = [torch.bfloat16, torch.float16, torch.float32]
PROBES = ["g", "beta"]


@triton.jit
def _exp_kernel(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(y_ptr + offs, tl.exp(tl.load(x_ptr + offs)))


def _kernel_exp(x: torch.Tensor) -> torch.Tensor:
    """exp as a Triton kernel computes it (numpy's exp under the interpreter)."""
    flat = x.contiguous().view(-1)
    out = torch.empty_like(flat)
    _exp_kernel[(1,)](flat, out, N=flat.numel())
    return out.view_as(x)


def packed_decode(inputs, probe):
    from sglang.kernels.ops.attention.fla.fused_recurrent import (
        fused_recurrent_gated_delta_rule_packed_decode,
    )

    mixed, state = probe_rows(inputs, probe)
    pool = torch.cat([torch.full_like(state[:1], 7.0), state])  # slot 0 unused
    out = torch.empty(inputs.N, 1, inputs.HV, inputs.V, dtype=mixed.dtype)
    indices = torch.arange(1, inputs.N + 1, dtype=torch.int32)
    fused_recurrent_gated_delta_rule_packed_decode(
        mixed,
        inputs.a,
        inputs.b,
        inputs.A_log,
        inputs.dt_bias,
        inputs.K**-0.5,
        pool,
        out,
        indices,
        use_qk_l2norm_in_kernel=False,
    )
    return read_probe(pool[1:], probe)


def target_verify(inputs, probe):
    from sglang.kernels.ops.attention.linear.fused_sigmoid_gating_recurrent import (
        fused_sigmoid_gating_delta_rule_update,
    )

    mixed, state = probe_rows(inputs, probe)
    n, h, hv, k_dim, v_dim = inputs.N, inputs.H, inputs.HV, inputs.K, inputs.V
    q, k, v = torch.split(mixed, [h * k_dim, h * k_dim, hv * v_dim], dim=-1)
    inter = torch.zeros(n, 1, hv, v_dim, k_dim)
    fused_sigmoid_gating_delta_rule_update(
        inputs.A_log,
        inputs.a,
        inputs.dt_bias,
        1.0,
        20.0,
        q.reshape(1, n, h, k_dim),
        k.reshape(1, n, h, k_dim),
        v.reshape(1, n, hv, v_dim),
        inputs.b,
        state,
        torch.arange(n, dtype=torch.int32),
        scale=k_dim**-0.5,
        use_qk_l2norm_in_kernel=False,
        cu_seqlens=torch.arange(n + 1, dtype=torch.int32),
        disable_state_update=True,
        intermediate_states_buffer=inter,
        intermediate_state_indices=torch.arange(n, dtype=torch.int32),
        cache_steps=1,
    )
    return read_probe(inter[:, 0], probe)


def replayssm_decode(inputs, probe):
    """ReplaySSM decode with a one-entry ring: every step flushes into the checkpoint."""
    from sglang.kernels.ops.attention.linear.fused_recurrent_linear_replayssm import (
        fused_recurrent_linear_replayssm_decode,
    )

    mixed, state = probe_rows(inputs, probe)
    n, h, hv, k_dim, v_dim = inputs.N, inputs.H, inputs.HV, inputs.K, inputs.V
    out = torch.empty(n, 1, hv, v_dim, dtype=mixed.dtype)
    fused_recurrent_linear_replayssm_decode(
        mixed,
        inputs.a,
        inputs.b,
        inputs.A_log,
        inputs.dt_bias,
        k_dim**-0.5,
        state,
        d_cache=torch.zeros(n, hv, 1, v_dim),
        k_cache=torch.zeros(n, h, 1, k_dim),
        g_cache=torch.zeros(n, hv, 1),
        out=out,
        ssm_state_indices=torch.arange(n, dtype=torch.int32),
        write_pos=torch.zeros(n, dtype=torch.int32),
        use_qk_l2norm_in_kernel=False,
        nk=1,
    )
    return read_probe(state, probe)


def replayssm_spec_decode(inputs, probe):
    """GDN ReplaySSM spec verify: one request's window of N tokens; it stores each
    token's g and beta in its ring (checkpoint slot 0 is the null block)."""
    from sglang.kernels.ops.attention.linear.gdn_replayssm_spec_decode import (
        gdn_replayssm_spec_decode,
    )

    n, h, hv, k_dim, v_dim, ring = inputs.N, inputs.H, inputs.HV, inputs.K, inputs.V, 4
    mixed, _ = probe_rows(inputs, probe)
    q, k, v = torch.split(mixed, [h * k_dim, h * k_dim, hv * v_dim], dim=-1)
    g_ring, beta_ring = torch.zeros(1, hv, ring), torch.zeros(1, hv, ring)
    one = torch.zeros(1, dtype=torch.int32)
    gdn_replayssm_spec_decode(
        q.reshape(n, h, k_dim), k.reshape(n, h, k_dim), v.reshape(n, hv, v_dim),
        inputs.a, inputs.b, inputs.A_log, inputs.dt_bias, torch.zeros(2, hv, v_dim, k_dim),
        torch.zeros(1, hv, ring, v_dim, dtype=mixed.dtype),
        torch.zeros(1, h, ring, k_dim, dtype=mixed.dtype), g_ring,
        torch.zeros(1, hv, ring, v_dim, dtype=mixed.dtype),
        torch.zeros(1, h, ring, k_dim, dtype=mixed.dtype), beta_ring,
        torch.empty(n, hv, v_dim, dtype=mixed.dtype),
        query_start_loc=torch.tensor([0, n], dtype=torch.int32),
        ssm_state_indices=one + 1, replay_indices=one, write_pos=one, cache_base=one,
        is_flush=one.to(torch.int8), max_cache_len=ring, max_spec_len=n,
        launch_mode="verify", dot_precision="ieee", block_v=v_dim, nk=1,
    )  # fmt: skip
    return _kernel_exp(g_ring[0].T) if probe == "g" else beta_ring[0].T


def prefill_gating(inputs, probe):
    from sglang.kernels.ops.attention.linear.fused_gdn_gating import fused_gdn_gating

    g, beta = fused_gdn_gating(inputs.A_log, inputs.a, inputs.b, inputs.dt_bias)
    return _kernel_exp(g[0]) if probe == "g" else beta[0]


SITES = {
    "target_verify": target_verify,
    "prefill_gating": prefill_gating,
    "replayssm_decode": replayssm_decode,
    "replayssm_spec_decode": replayssm_spec_decode,
}


@pytest.mark.parametrize("probe", PROBES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("site", sorted(SITES))
def test_site_gate_equals_packed_decode(sglang_tree, site, dtype, probe):
    inputs = random_gate_inputs(dtype, seed=DTYPES.index(dtype))
    reference = packed_decode(inputs, probe)
    assert torch.equal(SITES[site](inputs, probe), reference)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_beta_is_rounded_through_the_dtype_of_b(sglang_tree, dtype):
    """The series keeps 0.5.23's decode choice (GDN_BETA_ROUND_TO_INPUT_DTYPE)."""
    inputs = random_gate_inputs(dtype, seed=7)
    beta = packed_decode(inputs, "beta")
    assert torch.equal(beta.to(dtype).float(), beta)
    assert torch.allclose(beta, torch.sigmoid(inputs.b.float()), rtol=2**-7, atol=0)


def test_gdn_gate_rejects_softplus_beta_other_than_one(sglang_tree):
    from sglang.kernels.ops.attention.linear.fused_gdn_gating import fused_gdn_gating

    inputs = random_gate_inputs(torch.bfloat16, seed=0)
    with pytest.raises(ValueError, match="softplus beta=1.0"):
        fused_gdn_gating(inputs.A_log, inputs.a, inputs.b, inputs.dt_bias, beta=2.0)
