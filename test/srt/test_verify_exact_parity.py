"""--gdn-verify-exact-parity under the Triton interpreter: the invariant, by construction.

For every request and draft step t, the parity verify's output row and its state
snapshot for step t equal what packed decode produces and stores when the same
rows are fed one token at a time from the committed state. After the real
commit of any accepted length, the persistent state equals Base decode's, and
the next round continues from it. (sglang's scatter kernel refuses CPU tensors,
so the commit here is the same byte copy in torch; the CUDA test in patch 0003
and benchmark/gpu_verify_parity.py commit through the real kernel.)
"""

from __future__ import annotations

import pytest
import torch


def _rows(n: int, d: int, h: int, hv: int, k: int, v: int, gen: torch.Generator):
    mixed = torch.randn(n * d, 2 * h * k + hv * v, generator=gen).to(torch.bfloat16)
    a = torch.randn(n * d, hv, generator=gen).to(torch.bfloat16)
    b = torch.randn(n * d, hv, generator=gen).to(torch.bfloat16)
    return mixed, a, b


def _decode_token_by_token(mixed, a, b, A_log, dt_bias, pool, indices, n, d, hv, v, k):
    """Base decode of the d tokens of each request; outputs and state after each step."""
    from sglang.kernels.ops.attention.fla.fused_recurrent import (
        fused_recurrent_gated_delta_rule_packed_decode,
    )

    outputs, states = [], []
    for t in range(d):
        rows = torch.arange(n) * d + t
        out = torch.empty(n, 1, hv, v, dtype=mixed.dtype)
        fused_recurrent_gated_delta_rule_packed_decode(
            mixed[rows].contiguous(), a[rows].contiguous(), b[rows].contiguous(),
            A_log, dt_bias, k**-0.5, pool, out, indices, use_qk_l2norm_in_kernel=True,
        )  # fmt: skip
        outputs.append(out.view(n, hv, v))
        states.append(pool[indices.clamp(min=0).long()].clone())
    return torch.stack(outputs, 1), torch.stack(states, 1)


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

        ref_pool = committed.clone()
        ref_out, ref_states = _decode_token_by_token(
            mixed, a, b, A_log, dt_bias, ref_pool, indices, n, d, hv, v, k
        )
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
    _, ref_states = _decode_token_by_token(
        mixed, a, b, A_log, dt_bias, pool.clone(), indices, n, d, hv, v, k
    )
    assert not torch.equal(intermediate, ref_states)


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
