"""Patch 0006: ``causal_conv1d_update`` with a conv state of another dtype than the
activations (SGLANG_MAMBA_CONV_DTYPE).

An fp32 conv state, single-token (decode's fallback when the fused proj/conv kernel is
ineligible) and multi-token with intermediate windows (verify), against a float64 torch
reference; the registered CUDA test's comparison on CPU; and decode against 0.5.23's.
"""

from __future__ import annotations

import pytest
import torch

from helpers.backend_rig import Shape

S = Shape(n=1, d=1, h=2, hv=4, k=16, v=16)
CONV_DIM, HV, K, V, W = S.conv_dim, S.hv, S.k, S.v, S.w


def _conv_reference(window: torch.Tensor, xs: torch.Tensor, weight: torch.Tensor):
    """float64 causal conv + SiLU over tokens; returns outputs and windows after each."""
    outs, windows = [], []
    for t in range(xs.shape[-1]):
        full = torch.cat([window, xs[..., t : t + 1]], dim=-1)  # [B, dim, W]
        acc = (full * weight[None]).sum(-1)
        outs.append(acc * torch.sigmoid(acc))
        window = full[..., 1:]
        windows.append(window)
    return torch.stack(outs, -1), torch.stack(windows, 1)


@pytest.mark.parametrize("steps", [1, 3])
def test_conv_update_with_fp32_state_matches_float64(sglang_tree, steps):
    from sglang.kernels.ops.mamba.causal_conv1d_triton import causal_conv1d_update

    gen = torch.Generator().manual_seed(steps)
    batch, dim = 2, 32
    weight = torch.randn(dim, W, generator=gen).to(torch.bfloat16)
    state = torch.randn(batch + 1, dim, W - 1, generator=gen)  # fp32 pool
    x = torch.randn(batch, dim, steps, generator=gen).to(torch.bfloat16)
    indices = torch.tensor([2, 0], dtype=torch.int32)
    ref_out, ref_windows = _conv_reference(
        state[indices.long()].double(), x.double(), weight.double()
    )
    pool = state.clone()
    if steps == 1:
        out = causal_conv1d_update(
            x[..., 0], pool, weight, None, "silu", conv_state_indices=indices
        ).unsqueeze(-1)
    else:
        windows = torch.zeros(batch, steps, dim, W - 1)
        out = causal_conv1d_update(
            x, pool, weight, None, "silu", conv_state_indices=indices,
            intermediate_conv_window=windows,
            intermediate_state_indices=torch.arange(batch, dtype=torch.int32),
        )  # fmt: skip
        # The saved window of every step holds the exact (widened) activations.
        assert torch.equal(windows.double(), ref_windows)
    assert pool.dtype == torch.float32
    assert torch.equal(pool[indices.long()].double(), ref_windows[:, -1])
    torch.testing.assert_close(out.double(), ref_out, rtol=2**-7, atol=1e-2)


def test_fp32_conv_pool_slot_copy_and_clear(sglang_tree):
    """MambaPool's copy (COW, fork) and clear keep fp32 conv states exact.

    The pool object is made without ``__init__`` (it allocates for a whole model
    config); the fields the two methods read are set to real tensors. A non-bf16
    (or non-CUDA) pool takes the per-tensor indexing path."""
    from sglang.srt.mem_cache.memory_pool import MambaPool

    gen = torch.Generator().manual_seed(9)
    layers, slots = 2, 4
    conv = torch.randn(layers, slots, CONV_DIM, W - 1, generator=gen)
    temporal = torch.randn(layers, slots, HV, V, K, generator=gen)
    pool = MambaPool.__new__(MambaPool)
    pool.mamba_cache = MambaPool.State(conv=[conv], temporal=temporal)
    pool._slot_siblings = []
    pool.replayssm_write_pos = None
    pool.debug_memory_pool = False
    assert not pool._should_fuse_slot_ops()

    source = conv[:, 1].clone()
    pool.copy_from(torch.tensor([1]), torch.tensor([3]))
    assert torch.equal(conv[:, 3], source) and conv.dtype == torch.float32
    pool.clear_slots(torch.tensor([1]))
    assert not conv[:, 1].any() and not temporal[:, 1].any()
    assert torch.equal(conv[:, 3], source)


def _registered_conv_test(tree):
    """Patch 0006's registered CUDA test module, loaded from the tree."""
    import importlib.util

    path = tree / "test/registered/kernels/ops/mamba/test_gdn_conv_state_dtype.py"
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("act_dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("state_dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_multi_token_conv_update_equals_token_by_token(sglang_tree, state_dtype, act_dtype):
    """Verify's D-token conv equals decode's one-token convs for every dtype pair.

    The registered test's own comparison (bit patterns; its state holds values a bf16
    state keeps and fp16 cannot), on CPU under the interpreter. Without patch 0006,
    fp16 and fp32 states differ from step 1 on (verify multiplied earlier draft tokens
    in the activation dtype, decode read them back in the state's dtype), and fp16
    activations with a bf16 state differ in the windows (decode's shift rounded the
    kept state values through fp16)."""
    module = _registered_conv_test(sglang_tree)
    (v_out, v_win), (d_out, d_win), _ = module.verify_and_decode(
        2, 32, 4, state_dtype, "cpu", act_dtype
    )
    for t in range(4):
        assert torch.equal(module._bits(v_out[..., t]), module._bits(d_out[..., t])), t
        assert torch.equal(module._bits(v_win[:, t]), module._bits(d_win[:, t])), t


def test_decode_keeps_bf16_state_values_with_fp16_activations(sglang_tree, series):
    """0.5.23's decode shifted a bf16 conv state through fp16 when the tokens were fp16:
    1e5 became inf and 3.6e-7 an fp16 subnormal. With 0006 the kept values stay bf16."""
    from gdn_parity.drift.run.variants import variant_named, variant_tree

    base = _load_kernel_module(variant_tree(series, variant_named("0.5.23")), "conv_0523_shift")
    patched = _load_kernel_module(sglang_tree, "conv_patched_shift")
    weight = torch.ones(4, W).half()
    x = torch.ones(1, 4).half()
    state = torch.zeros(1, 4, W - 1)
    state[0, 0, -1], state[0, 1, -1] = 1.0e5, 3.6e-7
    state = state.bfloat16()
    kept = state[0, :2, -1].clone()
    shifted = {}
    for name, module in (("0.5.23", base), ("0006", patched)):
        s = state.clone()
        module.causal_conv1d_update(
            x.clone(), s, weight, None, None, conv_state_indices=torch.tensor([0]).int()
        )
        shifted[name] = s[0, :2, -2]
    assert torch.equal(shifted["0006"], kept)
    assert torch.isinf(shifted["0.5.23"][0]) and shifted["0.5.23"][1] != kept[1]


def _load_kernel_module(tree, name):
    """``causal_conv1d_triton`` of ``tree``, beside the importable sglang (its imports are
    modules the series does not change)."""
    import importlib.util

    path = tree / "python/sglang/kernels/ops/mamba/causal_conv1d_triton.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_one_token_update_equals_0523_for_fp16_activations_and_a_bf16_state(sglang_tree, series):
    """Decode (one token per call) is what 0.5.23 computes, for every dtype pair, while
    the state holds values fp16 can represent (see the test above for those it cannot).

    SGLANG_MAMBA_CONV_DTYPE defaults to bfloat16 whatever the model dtype, so an fp16
    model's decode convolves fp16 tokens against a bf16 window. Patch 0006 rounds a
    token to the state's dtype only where a later token of the same call reads it;
    the current token's own term stays fp16, as 0.5.23 computes it. (An earlier
    version of the patch rounded every token and changed this decode.)
    """
    from gdn_parity.drift.run.variants import variant_named, variant_tree

    base = _load_kernel_module(variant_tree(series, variant_named("0.5.23")), "conv_0523")
    patched = _load_kernel_module(sglang_tree, "conv_patched")
    gen = torch.Generator().manual_seed(4)
    batch, dim = 3, 64
    weight = torch.randn(dim, W, generator=gen).half()
    x = (torch.randn(batch, dim, generator=gen) * 3).half()
    state = (torch.randn(batch + 1, dim, W - 1, generator=gen) * 3).bfloat16()
    indices = torch.tensor([2, 0, 3], dtype=torch.int32)
    results = []
    for module in (base, patched):
        s = state.clone()
        out = module.causal_conv1d_update(
            x.clone(), s, weight, None, "silu", conv_state_indices=indices
        )
        results.append((out, s))
    assert torch.equal(results[0][0], results[1][0])
    assert torch.equal(results[0][1], results[1][1])
