"""Patch 0005: a tracked prefill with an fp32 conv pool and bf16 activations
(SGLANG_MAMBA_CONV_DTYPE=float32).

The real ``GDNAttnBackend.forward_extend`` prefill branch that crashed with "Index put
requires the source and destination dtypes match" (sglang#31719, #35150): a mamba track
mask makes it snapshot raw activations into the pool. The patch's own registered CPU
test runs from ``test_upstream_cpu_tests.py``.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from helpers.backend_rig import Shape, make_layer

S = Shape(n=1, d=1, h=2, hv=4, k=16, v=16)
CONV_DIM, HV, K, V, W = S.conv_dim, S.hv, S.k, S.v, S.w


def _extend_with_track(conv_dtype):
    from sglang.srt.layers.attention.mamba.mamba2_metadata import ForwardMetadata
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    from gdn_parity.drift.model.server import backends
    from gdn_parity.drift.model.server.numerics import ServerNumerics

    gen = torch.Generator().manual_seed(5)
    layer = make_layer(0, S, gen, "cpu")
    seq, slots = 8, 3
    state = backends.speculative_state(S.config, slots - 1, 1, torch.float32, conv_dtype, "cpu")
    conv = state.conv[0][0]
    numerics = ServerNumerics.of_server(deterministic=False, exact_parity=False)
    backend = backends.gdn_backend(state, [0], numerics, slots - 1, "cpu")
    backend.requires_contiguous_prefill_state = False  # what prefill reads
    track_rows = torch.tensor([[2, 3, 4]])  # the conv window after token 4, into slot 2
    backend.forward_metadata = ForwardMetadata(
        query_start_loc=torch.tensor([0, seq], dtype=torch.int32),
        mamba_cache_indices=torch.tensor([0], dtype=torch.int32),
        has_mamba_track_mask=True,
        track_conv_indices=track_rows,
        conv_states_mask_indices=torch.tensor([2]),
        track_ssm_h_src=torch.empty(0, dtype=torch.long),
        track_ssm_h_dst=torch.empty(0, dtype=torch.long),
        track_ssm_final_src=torch.empty(0, dtype=torch.long),
        track_ssm_final_dst=torch.empty(0, dtype=torch.long),
    )
    batch = SimpleNamespace(
        forward_mode=ForwardMode.EXTEND,
        extend_prefix_lens=torch.zeros(1, dtype=torch.int32),
        extend_seq_lens_cpu=[seq],
        req_pool_indices=torch.tensor([0]),
    )
    x = torch.randn(seq, CONV_DIM, generator=gen).to(torch.bfloat16)
    a = torch.randn(seq, HV, generator=gen).to(torch.bfloat16)
    b = torch.randn(seq, HV, generator=gen).to(torch.bfloat16)
    out = backend.forward_extend(layer, batch, mixed_qkv=x, a=a, b=b)
    return out, conv, x[track_rows[0]].transpose(0, 1), x[-(W - 1) :].transpose(0, 1)


def test_fp32_conv_pool_track_snapshot_stores_the_widened_activations(sglang_tree):
    out, conv, tracked, final = _extend_with_track(torch.float32)
    assert torch.equal(conv[2], tracked.float())
    assert torch.equal(conv[0], final.float()), "the request's own slot: the final window"
    assert not conv[1].any()
    out_bf16, conv_bf16, _, _ = _extend_with_track(torch.bfloat16)
    assert torch.equal(conv_bf16[2], tracked)
    assert torch.equal(out, out_bf16), "a prefill from scratch does not read the pool"
