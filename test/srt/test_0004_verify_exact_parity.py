"""Patch 0004, --gdn-verify-exact-parity under the Triton interpreter: the invariant.

The kernel:
For every request and draft step t, the parity verify's output row and its state
snapshot for step t equal what packed decode produces and stores when the same
rows are fed one token at a time from the committed state. After the real
commit of any accepted length, the persistent state equals Base decode's, and
the next round continues from it. (sglang's scatter kernel refuses CPU tensors,
so the commit here is the same byte copy in torch; the CUDA test in patch 0004
and benchmark/gpu/verify_parity.py commit through the real kernel.)

The backend: the real ``GDNAttnBackend.forward_extend`` target-verify branch, with
the flag on and off (``helpers.backend_rig``: real sglang objects and tensors, no
``__init__``), against Base decode of the same rows with sglang's single-token
``causal_conv1d_update`` first; and its ``forward_decode``, which under the flag
must launch the kernel verify launches, with verify's compile-time arguments.

The reference everywhere is ``gdn_parity.drift.reference.decode_token_by_token``.

The patch's registered backend test, which builds the backend with its own
``__init__`` from sglang's GDN attention test kit, runs here too, in an
interpreter of its own (the kit changes process-wide state), under the Triton
interpreter at the shapes CI runs.
"""

from __future__ import annotations

import pytest
import torch

from gdn_parity.drift.reference import ConvInputs, decode_token_by_token
from helpers.backend_rig import BackendRig, Shape, make_layer
from helpers.launches import recorded_launches
from helpers.registered import run_registered


def _rows(n: int, d: int, h: int, hv: int, k: int, v: int, gen: torch.Generator):
    mixed = torch.randn(n * d, 2 * h * k + hv * v, generator=gen).to(torch.bfloat16)
    a = torch.randn(n * d, hv, generator=gen).to(torch.bfloat16)
    b = torch.randn(n * d, hv, generator=gen).to(torch.bfloat16)
    return mixed, a, b


@pytest.mark.parametrize(
    "pool_dtype,hv,h,n,d",
    [
        (torch.bfloat16, 4, 2, 3, 2),
        (torch.float16, 2, 1, 2, 3),
        (torch.float32, 4, 4, 3, 4),
    ],
    ids=["bf16-pool", "fp16-pool", "fp32-pool"],
)
def test_parity_verify_equals_decode_then_commit_and_continue(sglang_tree, pool_dtype, hv, h, n, d):
    from sglang.kernels.ops.attention.fla.fused_recurrent import (
        fused_recurrent_gated_delta_rule_packed_verify,
    )

    k = v = 16
    gen = torch.Generator().manual_seed(n * 100 + d)
    A_log = torch.randn(hv, generator=gen)
    dt_bias = torch.randn(hv, generator=gen)
    pool = (torch.randn(n + 2, hv, v, k, generator=gen) * 0.1).to(pool_dtype)
    indices = torch.tensor([n + 1, -1, *range(1, n - 1)], dtype=torch.int32)[:n]  # row 1 is padding
    valid = indices >= 0
    scratch = torch.arange(n, dtype=torch.int32)

    for _round in range(2):
        mixed, a, b = _rows(n, d, h, hv, k, v, gen)
        committed = pool.clone()
        intermediate = torch.zeros(n, d, hv, v, k, dtype=pool_dtype)
        out = fused_recurrent_gated_delta_rule_packed_verify(
            mixed, a, b, A_log, dt_bias, k**-0.5, pool, intermediate, indices, scratch,
            num_steps=d, use_qk_l2norm_in_kernel=True,
        )  # fmt: skip
        assert torch.equal(pool, committed), "the persistent pool must only be read"

        ref = decode_token_by_token(mixed, a, b, A_log, dt_bias, committed.clone(), indices, d)
        ref_out, ref_states = ref.outputs, ref.states
        assert torch.equal(out.view(n, d, hv, v), ref_out)
        assert not out.view(n, d, hv, v)[~valid].any(), "padded rows give zeros, as in decode"
        assert torch.equal(intermediate[valid], ref_states[valid])

        accept = torch.randint(1, d + 1, (n,), generator=gen)
        for i in torch.nonzero(valid).flatten().tolist():
            pool[indices[i]] = intermediate[i, accept[i] - 1]
            assert torch.equal(pool[indices[i]], ref_states[i, accept[i] - 1])


def test_the_default_verify_kernel_does_not_hold_the_invariant(sglang_tree):
    """Negative control: the same comparison catches the default path's drift."""
    from sglang.kernels.ops.attention.linear.fused_sigmoid_gating_recurrent import (
        fused_sigmoid_gating_delta_rule_update,
    )

    n, d, h, hv, k, v = 2, 3, 2, 4, 16, 16
    gen = torch.Generator().manual_seed(3)
    A_log, dt_bias = torch.randn(hv, generator=gen), torch.randn(hv, generator=gen)
    pool = (torch.randn(n, hv, v, k, generator=gen) * 0.1).to(torch.bfloat16)
    indices = torch.arange(n, dtype=torch.int32)
    mixed, a, b = _rows(n, d, h, hv, k, v, gen)
    q, key, value = torch.split(mixed, [h * k, h * k, hv * v], dim=-1)
    intermediate = torch.zeros(n, d, hv, v, k, dtype=torch.bfloat16)
    fused_sigmoid_gating_delta_rule_update(
        A_log, a, dt_bias, 1.0, 20.0, q.reshape(1, n * d, h, k), key.reshape(1, n * d, h, k),
        value.reshape(1, n * d, hv, v), b, pool, indices, scale=k**-0.5,
        use_qk_l2norm_in_kernel=True, cu_seqlens=torch.arange(0, n * d + 1, d, dtype=torch.int32),
        disable_state_update=True, intermediate_states_buffer=intermediate,
        intermediate_state_indices=indices, cache_steps=d,
    )  # fmt: skip
    ref = decode_token_by_token(mixed, a, b, A_log, dt_bias, pool.clone(), indices, d)
    assert not torch.equal(intermediate, ref.states)


def test_parity_verify_rejects_a_snapshot_buffer_of_another_dtype(sglang_tree):
    from sglang.kernels.ops.attention.fla.fused_recurrent import (
        fused_recurrent_gated_delta_rule_packed_verify,
    )

    mixed = torch.zeros(2, 2 * 16 + 2 * 16, dtype=torch.bfloat16)
    ab = torch.zeros(2, 2, dtype=torch.bfloat16)
    pool = torch.zeros(2, 2, 16, 16)
    with pytest.raises(ValueError, match="state pool's dtype"):
        fused_recurrent_gated_delta_rule_packed_verify(
            mixed, ab, ab, torch.zeros(2), torch.zeros(2), 0.25, pool,
            torch.zeros(1, 2, 2, 16, 16, dtype=torch.bfloat16),
            torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32), num_steps=2,
        )  # fmt: skip


# --- the backend's verify route -----------------------------------------------

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
    rig = BackendRig(0, S, INDICES, torch.bfloat16, "cpu", exact_parity=flag)
    rig.state.conv[0][0].copy_(pools[0])
    rig.state.temporal[0].copy_(pools[1])
    positions = torch.arange(S.n * S.d)
    out = rig.verify(
        layer, x, a, b, ["r0", "r1"], positions, torch.zeros(S.n * S.d, dtype=torch.long)
    )
    return out, rig.state


def _decode(layer, pools, x, a, b):
    """Base decode: conv update and packed decode, one token at a time."""
    conv, ssm = (p.clone() for p in pools)
    conv_inputs = ConvInputs(conv, layer.conv_weights, layer.bias, layer.activation)
    ref = decode_token_by_token(x, a, b, layer.A_log, layer.dt_bias, ssm, INDICES, S.d, conv_inputs)
    return ref.outputs, ref.states, ref.windows


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


def test_flag_on_decode_runs_the_kernel_and_arguments_verify_runs(sglang_tree, batch):
    """The flag's wiring through the backend: ``GDNAttnBackend.forward_decode`` passes
    ``exact_parity`` down, so each decode step launches the steps kernel with verify's
    compile-time arguments (T = 1 against verify's T = D), which is the one binary the
    GPU's bitwise parity rests on, and its outputs and states equal verify's rows and
    snapshots. Under the interpreter 0.5.23's packed decode kernel computes the same
    numbers as the steps kernel, so the launch is what tells them apart here: with
    ``exact_parity=False`` in forward_decode, decode launches that kernel and this fails.
    """
    from sglang.kernels.ops.attention.fla import fused_recurrent

    kernels = (
        fused_recurrent.fused_recurrent_gated_delta_rule_packed_decode_kernel,
        fused_recurrent.fused_recurrent_gated_delta_rule_packed_steps_kernel,
    )
    layer, pools, x, a, b = batch
    rids = ["r0", "r1"]
    positions = torch.arange(S.n * S.d)
    input_ids = torch.zeros(S.n * S.d, dtype=torch.long)
    with recorded_launches(*kernels) as verify_launches:
        out, state = _verify(True, layer, pools, x, a, b)

    rig = BackendRig(0, S, INDICES, torch.bfloat16, "cpu", exact_parity=True)
    rig.state.conv[0][0].copy_(pools[0])
    rig.state.temporal[0].copy_(pools[1])
    decoded, states = [], []
    with recorded_launches(*kernels) as decode_launches:
        for t in range(S.d):
            rows = torch.arange(S.n) * S.d + t
            step = rig.decode(
                layer, x[rows], a[rows], b[rows], rids, positions[rows], input_ids[rows]
            )
            decoded.append(step)
            states.append(rig.state.temporal[0][INDICES.long()].clone())

    (verify_launch,) = verify_launches
    assert verify_launch.kernel == "fused_recurrent_gated_delta_rule_packed_steps_kernel"
    assert verify_launch.args["T"] == S.d
    assert [launch.kernel for launch in decode_launches] == [verify_launch.kernel] * S.d
    for launch in decode_launches:
        assert launch.args["T"] == 1
        assert launch.constexprs == verify_launch.constexprs
    assert torch.equal(torch.stack(decoded, 1), out)
    assert torch.equal(torch.stack(states, 1), state.intermediate_ssm[0, : S.n])


def test_registered_backend_test_passes_on_cpu(sglang_tree):
    """Every case of the registered backend test, on CPU: with the flag (read by
    ``GDNAttnBackend.__init__`` from the published config), each decode step through
    the backend launches the steps kernel verify launches, with verify's compile-time
    arguments, and verify's outputs, SSM snapshots and conv windows equal decode's
    token by token (bf16 and fp16 activations, two head layouts); without it, decode
    launches the packed decode kernel."""
    run = run_registered(
        sglang_tree,
        "test/registered/attention/unittests/gdn/test_gdn_backend_verify_exact_parity.py",
        {"TestGDNBackendVerifyExactParity": {"DEVICE": "cpu"}},
    )
    assert run.ran == 2, run.output[-4000:]
    assert not run.failed, (run.failed, run.output[-8000:])
    assert not run.skipped, run.skipped
