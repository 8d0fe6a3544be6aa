"""``--kv-cache-dtype fp8_e4m3`` on the server stack: sglang's pool holds FP8, and sglang's
attention reads it back with the layers' scales.

One set of tiny weights runs twice, with a bfloat16 pool (``auto``) and with an FP8 one, under
deterministic inference and the flag, through prefill and one decode step. Every layer before
the attention layer computes the same bits in both runs, so the attention gets the same q, k
and v; only what its cache holds differs. With deterministic inference the decode kernel
runs one KV split (256-token tiles) of one block at these lengths, so its arithmetic is the
reference's below: q and the softmax weights cast to the cache's FP8, fp32 dots, the scales.
Each FP8 run is made twice: without scales (sglang for a checkpoint without them) and with a
per-tensor scale of 1.5 (a quantized checkpoint's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import torch

from gdn_parity.debug.issue35150 import INPUT_IDS

pytestmark = pytest.mark.slow  # three server-stack runs under the interpreter (~1 min)

FP8 = torch.float8_e4m3fn
SCALE = 1.5  # not a power of two: K/V / SCALE rounds


@dataclass
class Run:
    model: Any  # ServerModel
    q: torch.Tensor  # the attention's query in the decode step, [rows, heads * head_dim]
    out: torch.Tensor  # its output


@pytest.fixture(scope="module")
def weights(sglang_tree):
    from gdn_parity.drift.model.config import SIZES
    from gdn_parity.drift.model.weights import make_weights

    return make_weights(SIZES["tiny"], "cpu")


def _run(weights, kv_cache_dtype: str, kv_scale: float | None) -> Run:
    """Prefill three requests and decode one step; the attention's q and output, seen from
    outside the backend's own ``forward_decode``."""
    from gdn_parity.drift.model.stacks import StackSpec, build_stack
    from gdn_parity.drift.run import loops

    spec = StackSpec(
        "server", "tiny", "cpu", max_len=40, deterministic=True, exact_parity=True, requests=3,
        kv_cache_dtype=kv_cache_dtype, kv_scale=kv_scale,
    )  # fmt: skip
    model = build_stack(spec, weights=weights)
    _, first = loops.prefill(model, list(INPUT_IDS))
    seen = []
    forward_decode = model.attn.forward_decode

    def observed(q, k, v, layer, batch, *args, **kwargs):
        q_in = q.clone()
        out = forward_decode(q, k, v, layer, batch, *args, **kwargs)
        seen.append((q_in, out.clone()))
        return out

    model.attn.forward_decode = observed
    model.forward([first], len(INPUT_IDS), "decode")
    (q, out), *_ = seen
    return Run(model, q, out)


@pytest.fixture(scope="module")
def bf16(weights) -> Run:
    return _run(weights, "auto", None)


@pytest.fixture(scope="module", params=[None, SCALE], ids=["no-scales", f"scale-{SCALE}"])
def fp8(request, weights) -> Run:
    return _run(weights, "fp8_e4m3", request.param)


def _scale(run: Run) -> float:
    return 1.0 if run.model.kv_scale is None else run.model.kv_scale


def _written_slots(run: Run) -> torch.Tensor:
    """The KV slots of every request's tokens so far (prompt and the decoded one)."""
    model = run.model
    return torch.cat([model.kv_slots[i, : r.length] for i, r in enumerate(model.requests)]).long()


def test_the_pool_is_sglangs_fp8_pool(fp8):
    """sglang's MHATokenToKVPool in float8_e4m3fn: uint8 storage (its store_dtype), which
    get_key_buffer hands the kernels as an FP8 view of the same memory."""
    pool = fp8.model.attn.token_to_kv_pool
    assert (pool.dtype, pool.store_dtype) == (FP8, torch.uint8)
    for stored, get in (
        (pool.k_buffer, pool.get_key_buffer),
        (pool.v_buffer, pool.get_value_buffer),
    ):
        assert [b.dtype for b in stored] == [torch.uint8]
        view = get(0)
        assert view.dtype == FP8 and view.data_ptr() == stored[0].data_ptr()
    layer = fp8.model.layers[-1].radix  # the tiny model's one attention layer
    if fp8.model.kv_scale is None:
        assert (layer.k_scale, layer.v_scale) == (
            None,
            None,
        )  # RadixAttention's, no quant config
    else:
        assert (layer.k_scale_float, layer.v_scale_float) == (SCALE, SCALE)
        assert float(layer.k_scale) == float(layer.v_scale) == SCALE


def test_the_pool_holds_the_kv_cast_to_fp8(bf16, fp8):
    """Every K/V row written (prefill and decode, every request) is the bf16 run's row as
    sglang's set_kv_buffer quantizes it: divided by the layer's scale in the model's dtype
    (when it has one), then cast to float8_e4m3fn."""
    slots = _written_slots(fp8)
    assert torch.equal(slots, _written_slots(bf16)) and len(slots) == 25 + 22 + 19
    ours, theirs = fp8.model.attn.token_to_kv_pool, bf16.model.attn.token_to_kv_pool
    for get in ("get_key_buffer", "get_value_buffer"):
        rows = getattr(theirs, get)(0)[slots]
        assert rows.dtype == torch.bfloat16 and rows.abs().max() > 0
        if fp8.model.kv_scale is not None:
            rows = (rows.float() / fp8.model.kv_scale).to(torch.bfloat16)
        expected = rows.to(FP8).view(torch.uint8)
        assert torch.equal(getattr(ours, get)(0)[slots].view(torch.uint8), expected), get


def _reference(run: Run, keys: torch.Tensor, values: torch.Tensor, scale: float) -> torch.Tensor:
    """Request 0's decode attention in fp32 as the decode kernel computes it over a cache that
    holds ``keys``/``values`` ``[tokens, kv heads, dim]`` (its values, as floats) with the
    layer's ``scale``: q and the softmax weights cast to the cache's dtype for the dots, the
    scores times the K scale, the output times the V scale. That is attention over the
    dequantized cache (K and V times the scale), with the kernel's roundings."""
    c = run.model.c
    group = c.attn_heads // c.attn_kv_heads
    dtype = run.model.kv_dtype
    q = run.q.view(-1, c.attn_heads, c.attn_head_dim)[0]
    out = []
    for head in range(c.attn_heads):
        scores = keys[:, head // group] @ q[head].to(dtype).float()
        scores = scores * (c.attn_head_dim**-0.5 * scale)
        weights = torch.exp(scores - scores.max())
        rounded = weights.to(dtype).float()
        out.append(rounded @ values[:, head // group] / weights.sum() * scale)
    return torch.stack(out)


def _cache(run: Run, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The attention layer's cached K and V at ``slots``, as floats."""
    pool = run.model.attn.token_to_kv_pool
    return (
        pool.get_key_buffer(0)[slots].float(),
        pool.get_value_buffer(0)[slots].float(),
    )


def test_decode_attention_reads_the_fp8_cache_back_with_the_scales(bf16, fp8):
    """The same q in both runs; the FP8 run's attention output is the reference over its
    cache and scales (to a bf16 rounding), and is not the bf16 run's."""
    c = fp8.model.c
    assert torch.equal(fp8.q, bf16.q)
    slots = fp8.model.attn.req_to_token[0, : fp8.model.requests[0].length].long()
    out = fp8.out.view(-1, c.attn_heads, c.attn_head_dim)[0].float()
    reference = _reference(fp8, *_cache(fp8, slots), _scale(fp8))
    torch.testing.assert_close(out, reference, rtol=2**-8, atol=2**-10)
    # The control: the same reference reproduces the bf16 run from its own cache...
    bf16_out = bf16.out.view(-1, c.attn_heads, c.attn_head_dim)[0].float()
    bf16_reference = _reference(bf16, *_cache(bf16, slots), 1.0)
    torch.testing.assert_close(bf16_out, bf16_reference, rtol=2**-8, atol=2**-10)
    # ...and the FP8 run is far from it: what it read was the FP8 cache.
    assert (out - bf16_reference).abs().max() > 2**-5
