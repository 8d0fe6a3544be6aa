"""Patch 0002: one definition of the gate math, and every site's bits as in 0.5.23
(CPU, Triton interpreter).

The sites are the real kernels of the patched tree: packed decode, the GDN path
of the target-verify kernel, prefill gating, and the ReplaySSM decode and spec
kernels. Decode, verify and ReplaySSM decode are read through the stored state
(see ``gdn_probes.py``); prefill gating returns g and beta, and the ReplaySSM
spec kernel stores them in its ring. sglang 0.5.23's kernels cannot be imported
beside the patched ones, so this file, run as a script, computes their values
in a process of its own on the 0.5.23 tree.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
    "packed_decode": packed_decode,
    "target_verify": target_verify,
    "prefill_gating": prefill_gating,
    "replayssm_decode": replayssm_decode,
    "replayssm_spec_decode": replayssm_spec_decode,
}
# Whether each site rounds beta through b's dtype; the patch states it at each call.
ROUNDS_BETA = {
    "packed_decode": True,
    "target_verify": False,
    "prefill_gating": True,
    "replayssm_decode": True,
    "replayssm_spec_decode": False,
}


def site_values() -> dict[str, torch.Tensor]:
    """Every site's g and beta for every dtype, keyed ``site/dtype/probe``."""
    values = {}
    for dtype in DTYPES:
        inputs = random_gate_inputs(dtype, seed=DTYPES.index(dtype))
        for site, run in SITES.items():
            for probe in PROBES:
                values[f"{site}/{dtype}/{probe}"] = run(inputs, probe)
    return values


def site_values_on(tree: Path, out: Path) -> dict[str, torch.Tensor]:
    """``site_values()`` on another tree's sglang, in a process of its own."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    test_dir = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [test_dir, env.get("PYTHONPATH")]))
    subprocess.run(
        [sys.executable, __file__, str(tree), str(out)], check=True, env=env, timeout=900
    )
    return torch.load(out)


@pytest.fixture(scope="module")
def release_values(series, tmp_path_factory) -> dict[str, torch.Tensor]:
    """The sites' values on sglang 0.5.23's kernels (the 0.5.23 variant's tree)."""
    from gdn_parity.drift.run.variants import variant_named, variant_tree

    tree = variant_tree(series, variant_named("0.5.23"))
    return site_values_on(tree, tmp_path_factory.mktemp("release") / "values.pt")


@pytest.mark.slow
def test_every_site_keeps_its_release_bits(sglang_tree, release_values):
    """The patch changes no default bits: each site's g and beta equal 0.5.23's. A site
    whose beta rounding is flipped fails here in bf16 and fp16 (b = -0.5 rounds)."""
    patched = site_values()
    assert sorted(patched) == sorted(release_values)
    changed = [key for key in patched if not torch.equal(patched[key], release_values[key])]
    assert not changed, changed


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("site", sorted(SITES))
def test_site_g_equals_packed_decode(sglang_tree, site, dtype):
    inputs = random_gate_inputs(dtype, seed=DTYPES.index(dtype))
    assert torch.equal(SITES[site](inputs, "g"), packed_decode(inputs, "g"))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("site", sorted(SITES))
def test_site_beta_keeps_its_rounding(sglang_tree, site, dtype):
    """Decode, prefill gating and ReplaySSM decode round beta through b's dtype; target
    verify and the ReplaySSM spec kernel keep it in fp32, the same fp32 value."""
    inputs = random_gate_inputs(dtype, seed=DTYPES.index(dtype))
    beta = SITES[site](inputs, "beta")
    fp32 = target_verify(inputs, "beta")
    assert torch.allclose(fp32, torch.sigmoid(inputs.b.float()), rtol=1e-6, atol=0)
    if ROUNDS_BETA[site]:
        assert torch.equal(beta, fp32.to(dtype).float())
    else:
        assert torch.equal(beta, fp32)
    if dtype != torch.float32:
        assert not torch.equal(fp32.to(dtype).float(), fp32), "b = -0.5 must round"


@pytest.mark.parametrize("softplus_beta", [1.0, 2.0])
def test_prefill_gating_keeps_its_softplus_beta(sglang_tree, softplus_beta):
    """``fused_gdn_gating(beta=...)`` computes log(1 + exp(beta * x)) / beta, as before."""
    from sglang.kernels.ops.attention.linear.fused_gdn_gating import fused_gdn_gating

    inputs = random_gate_inputs(torch.float32, seed=0)
    g, _ = fused_gdn_gating(inputs.A_log, inputs.a, inputs.b, inputs.dt_bias, beta=softplus_beta)
    x = (inputs.a + inputs.dt_bias).double()
    softplus = torch.where(
        softplus_beta * x <= 20.0, torch.log1p(torch.exp(softplus_beta * x)) / softplus_beta, x
    )
    expected = -torch.exp(inputs.A_log.double()) * softplus
    assert torch.allclose(g[0].double(), expected, rtol=1e-5, atol=1e-6)


if __name__ == "__main__":
    # python test_0002_gate_math.py TREE OUT: site_values() on TREE's sglang, into OUT.
    from gdn_parity.sandbox import torch_cpu_device, torchvision_shim, triton_interpreter_fixes

    triton_interpreter_fixes.install()
    torch_cpu_device.install()
    torchvision_shim.install()
    sys.path.insert(0, str(Path(sys.argv[1]) / "python"))
    torch.save(site_values(), sys.argv[2])
