"""Patch 0007: deterministic TARGET_VERIFY on the Triton backend equals Base decode, bitwise.

The real ``TritonAttnBackend`` (``triton_attn_rig``: no ``__init__``, real pool,
translator and kernels) computes, through its own ``init_forward_metadata``
and ``forward_decode``, what Base decode produces at every position of a
request, one token at a time. The same positions are then verified in one
TARGET_VERIFY forward through ``forward_extend``: eagerly (in one launch, and in
launches of two rows), and through the CUDA-graph metadata path
(``init_cuda_graph_state`` then ``init_forward_metadata_out_graph``) with the
batch padded as a graph pads it. Every verify row must equal decode's row
bitwise. The backend's previous verify path (the unified extend kernel) is the
negative control.

The rows' KV ids are built once per forward, from ``req_to_token`` (where the
draft step has put the drafts' slots), into the metadata's ``kv_indices``; under
CUDA graphs that is the existing ``cuda_graph_kv_indices``, so the route adds
no index buffer of ``max_num_tokens x context_len``.

What a row passes to the decode kernel besides its KV ids (an FP8 KV pool's
scales, attention sinks, the pool's page size) is checked on the rows and on the
kernel launches themselves (``helpers.launches``): verify must launch decode's
kernels with decode's compile-time arguments, the binary decode runs.

The patch's registered CUDA test, which builds the backend with its own
``__init__`` from sglang's attention test kit, runs here too, in an interpreter
of its own (the kit changes process-wide state), under the Triton interpreter at
tiny shapes (without graph capture: its CUDA-graph case runs the captured forward
again over the replay metadata).
"""

from __future__ import annotations

import pytest
import torch

from helpers.launches import recorded_launches
from helpers.registered import run_registered
from helpers.triton_attn_rig import AttnShape, decode_batch, make_backend, make_layer, verify_batch

S = AttnShape()
W = 3  # verify tokens per request (2 drafts + the bonus row)
# Committed lengths: one short, one whose verify rows cross the first split tile.
PREFIX = torch.tensor([37, 254], dtype=torch.int32)
REQ_ROWS = torch.tensor([3, 1], dtype=torch.int64)


@pytest.fixture
def case(sglang_tree):
    """Cache slots per request and the K/V/q of every position (prefix + verify tokens)."""
    gen = torch.Generator().manual_seed(6)
    n = len(PREFIX)
    slots = torch.randperm(S.slots - 1, generator=gen)[: n * S.context].view(n, S.context) + 1
    total = int(PREFIX.max()) + W
    k = torch.randn(n, total, S.kv_heads, S.dim, generator=gen).bfloat16()
    v = torch.randn(n, total, S.kv_heads, S.dim, generator=gen).bfloat16()
    q = torch.randn(n, W, S.heads * S.dim, generator=gen).bfloat16()
    return slots, k, v, q


def _fill_cache(backend, slots, k, v):
    """The cache as a verify step sees it: prefix and draft K/V written, and the
    drafts' slots in ``req_to_token`` after the prefix, where the draft step puts them."""
    kbuf, vbuf = backend.token_to_kv_pool.get_kv_buffer(0)
    for i, row in enumerate(REQ_ROWS):
        length = int(PREFIX[i]) + W
        backend.req_to_token[row, :length] = slots[i, :length].int()
        kbuf[slots[i, :length]] = k[i, :length]
        vbuf[slots[i, :length]] = v[i, :length]


def _base_decode(case) -> torch.Tensor:
    """forward_decode at each verify position, one token per request per step."""
    slots, k, v, q = case
    backend = make_backend(S, num_tokens_per_req=W, verify_as_decode=True)
    _fill_cache(backend, slots, k, v)
    layer = make_layer(S)
    rows = torch.empty(len(PREFIX), W, S.heads * S.dim, dtype=torch.bfloat16)
    for j in range(W):
        seq_lens = PREFIX + j + 1  # decode's seq_lens count the current token
        loc = slots[torch.arange(len(PREFIX)), seq_lens.long() - 1]
        fb = decode_batch(REQ_ROWS, seq_lens, loc)
        backend.init_forward_metadata(fb)
        rows[:, j] = backend.forward_decode(q[:, j], None, None, layer, fb, save_kv_cache=False)
    return rows.reshape(-1, S.heads * S.dim)


def _draft_locs(slots: torch.Tensor) -> torch.Tensor:
    return torch.cat([slots[i, int(p) : int(p) + W] for i, p in enumerate(PREFIX)])


def _row_ids(req_to_token, req_rows, prefix) -> torch.Tensor:
    """Plain torch: row (i, j) is the first prefix[i] + j + 1 ids of request i's table row."""
    return torch.cat(
        [
            req_to_token[int(r), : int(p) + j + 1].long()
            for r, p in zip(req_rows, prefix, strict=True)
            for j in range(W)
        ]
    )


def _verify_backend(case, verify_as_decode: bool):
    slots, k, v, _ = case
    backend = make_backend(S, num_tokens_per_req=W, verify_as_decode=verify_as_decode)
    _fill_cache(backend, slots, k, v)
    return backend


def _verify_eager(case, backend) -> torch.Tensor:
    slots, _, _, q = case
    fb = verify_batch(REQ_ROWS, PREFIX, _draft_locs(slots), W)
    backend.init_forward_metadata(fb)
    return backend.forward_extend(
        q.reshape(-1, S.heads * S.dim), None, None, make_layer(S), fb, save_kv_cache=False
    )


def _verify_graph_path(case, pad: int) -> torch.Tensor:
    """The CUDA-graph metadata path: buffers sized for a larger batch, ``pad``
    padded requests (seq_len 1, request row 0, out_cache_loc 0) as the graph
    runner pads them. The padded rows' outputs are discarded."""
    slots, _, _, q = case
    n = len(PREFIX)
    backend = _verify_backend(case, verify_as_decode=True)
    backend.init_cuda_graph_state(max_bs=n + pad + 1, max_num_tokens=(n + pad + 1) * W)
    seq_lens = torch.cat([PREFIX, torch.ones(pad, dtype=torch.int32)])
    rows = torch.cat([REQ_ROWS, torch.zeros(pad, dtype=torch.int64)])
    locs = torch.cat([_draft_locs(slots), torch.zeros(pad * W, dtype=torch.int64)])
    fb = verify_batch(rows, seq_lens, locs, W)
    backend.init_forward_metadata_out_graph(fb, in_capture=True)
    md = backend.forward_metadata
    expected = _row_ids(backend.req_to_token, rows, seq_lens)
    assert torch.equal(md.kv_indices[: len(expected)], expected)
    q_padded = torch.cat(
        [
            q.reshape(-1, S.heads * S.dim),
            torch.zeros(pad * W, S.heads * S.dim, dtype=torch.bfloat16),
        ]
    )
    out = backend.forward_extend(q_padded, None, None, make_layer(S), fb, save_kv_cache=False)
    return out[: n * W]


def test_row_ids_are_prefixes_of_the_request_rows(sglang_tree):
    """``pack_verify_decode_kv_indices`` (the translator's gather, once per verify
    step) against a plain torch construction: request order differs from table
    order, and a padded request reads table row 0."""
    from sglang.srt.layers.attention.verify_decode_rows import (
        pack_verify_decode_kv_indices,
        verify_decode_kv_indices_len,
        verify_decode_row_kv_lens,
    )

    backend = make_backend(S, num_tokens_per_req=W, verify_as_decode=True)
    gen = torch.Generator().manual_seed(0)
    table = backend.req_to_token
    table.copy_(torch.randint(1, S.slots, table.shape, generator=gen, dtype=table.dtype))
    req_rows = torch.tensor([4, 2, 5, 0])  # the last one a padded request
    prefix = torch.tensor([9, 1, 30, 1], dtype=torch.int32)
    row_lens = verify_decode_row_kv_lens(prefix, W)
    indptr = torch.zeros(len(row_lens) + 1, dtype=torch.int32)
    indptr[1:] = torch.cumsum(row_lens, 0)
    size = verify_decode_kv_indices_len(int(prefix.sum()), len(prefix), W)
    out = torch.full((size + 5,), -1, dtype=torch.int64)
    pack_verify_decode_kv_indices(
        backend.kv_index_translator,
        None,
        req_pool_indices=req_rows,
        seq_lens=prefix,
        num_tokens_per_req=W,
        row_kv_indptr=indptr,
        out=out,
    )
    expected = _row_ids(table, req_rows, prefix)
    assert int(indptr[-1]) == size == len(expected)
    assert torch.equal(out[:size], expected)
    assert torch.equal(out[size:], torch.full((5,), -1))  # nothing written past the rows


def test_eager_metadata_holds_the_rows(case):
    """The rows are built in ``init_forward_metadata``, once per forward, not by each layer."""
    backend = _verify_backend(case, verify_as_decode=True)
    slots = case[0]
    backend.init_forward_metadata(verify_batch(REQ_ROWS, PREFIX, _draft_locs(slots), W))
    md = backend.forward_metadata
    expected = _row_ids(backend.req_to_token, REQ_ROWS, PREFIX)
    assert torch.equal(
        md.kv_indptr[1:],
        torch.cumsum((PREFIX[:, None] + torch.arange(1, W + 1)).reshape(-1), 0).int(),
    )
    assert torch.equal(md.kv_indices, expected)


def test_eager_verify_rows_equal_decode(case):
    backend = _verify_backend(case, verify_as_decode=True)
    assert torch.equal(_verify_eager(case, backend), _base_decode(case))


def test_eager_rows_in_launches_of_two_equal_decode(case):
    """With more rows than the request pool holds, eager verify launches the decode
    kernel a few rows at a time, with split buffers of that many rows only."""
    backend = _verify_backend(case, verify_as_decode=True)
    backend.verify_as_decode_chunk_rows = 2
    out = _verify_eager(case, backend)
    assert backend.forward_metadata.attn_logits.shape[0] == 2
    assert torch.equal(out, _base_decode(case))


def test_graph_path_with_padded_rows_equals_decode(case):
    assert torch.equal(_verify_graph_path(case, pad=2), _base_decode(case))


def test_graph_state_adds_no_row_sized_index_buffer(case):
    """The rows live in ``cuda_graph_kv_indices``: the route's CUDA-graph state
    is the previous verify path's plus the rows' ``kv_indptr`` and room for the
    drafts' ``1 + ... + W`` ids per request."""

    def graph_bytes(verify_as_decode: bool) -> int:
        backend = _verify_backend(case, verify_as_decode=verify_as_decode)
        backend.init_cuda_graph_state(max_bs=4, max_num_tokens=4 * W)
        return sum(
            t.numel() * t.element_size()
            for name, t in vars(backend).items()
            if name.startswith("cuda_graph_") and isinstance(t, torch.Tensor)
        )

    extra = graph_bytes(True) - graph_bytes(False)
    assert extra == (4 * W + 1) * 4 + 4 * (W * (W + 1) // 2) * 8


def test_previous_verify_path_differs_from_decode(case):
    """Negative control: the unified extend kernel is not decode's arithmetic."""
    extend = _verify_eager(case, _verify_backend(case, verify_as_decode=False))
    decode = _base_decode(case)
    assert not torch.equal(extend, decode)
    # ...but it attends over the same keys: the rows agree to bf16 rounding.
    torch.testing.assert_close(extend, decode, atol=2e-2, rtol=2e-2)


# --- what a row passes to the decode kernel besides its KV ids ---------------

# Each case: the backend's keyword arguments, the layer's (k, v) scales, sinks or not.
ROW_ARGUMENTS = {
    # The reporter's KV cache: FP8 E4M3 with per-layer scales, which fold into the
    # softmax scale (k) and the output (v).
    "fp8-e4m3-kv-scales": (dict(kv_dtype=torch.float8_e4m3fn), (0.75, 1.5), False),
    # Attention sinks (gpt-oss): one logit per head in every softmax.
    "sinks": ({}, None, True),
    # A paged pool of 16-token pages (PAGE_SIZE=16 kernels).
    "paged-16": (dict(page_size=16), None, False),
}


def _paged_slots(gen: torch.Generator, page: int = 16) -> torch.Tensor:
    """Each request's slots, whole pages of consecutive slots as a paged allocator
    gives them (page 0 left out: slot 0 is the padding sink)."""
    n, per_req = len(PREFIX), -(-S.context // page)
    pages = torch.randperm(S.slots // page - 1, generator=gen)[: n * per_req] + 1
    slots = (pages[:, None] * page + torch.arange(page)).view(n, -1)
    return slots[:, : S.context].contiguous()


def _decode_kernels():
    from sglang.kernels.ops.attention import decode_attention

    return (
        decode_attention._fwd_kernel_stage1,
        decode_attention._fwd_grouped_kernel_stage1,
        decode_attention._fwd_kernel_stage2,
    )


@pytest.mark.parametrize("name", list(ROW_ARGUMENTS))
def test_verify_rows_pass_decodes_kernel_arguments(case, name):
    """FP8 KV scales, sinks and the pool's page size reach the decode kernel from
    verify's rows as they do from ``forward_decode``: the rows equal decode's bitwise,
    and every launch has decode's kernel, compile-time arguments (PAGE_SIZE, HAS_SINK)
    and softmax and value scales. On the GPU a compile-time argument picks the binary,
    and bitwise equality rests on decode and verify running one. PAGE_SIZE only
    rewrites a slot's address as page and offset, which for the kernel's 3-D KV
    buffers is the same address, so ``page_size=1`` in verify changes no number, only
    the binary; ``k_descale = 1.0`` and a dropped ``sinks`` change the rows too."""
    backend_kwargs, scales, with_sinks = ROW_ARGUMENTS[name]
    _, k, v, q = case
    slots = _paged_slots(torch.Generator().manual_seed(16))
    layer = make_layer(S)
    if scales is not None:
        layer.k_scale, layer.v_scale = (torch.tensor(x) for x in scales)
        layer.k_scale_float, layer.v_scale_float = scales
    sinks = torch.linspace(-1.0, 2.0, S.heads) if with_sinks else None

    def backend():
        b = make_backend(S, num_tokens_per_req=W, verify_as_decode=True, **backend_kwargs)
        pool = b.token_to_kv_pool
        for i, row in enumerate(REQ_ROWS):
            length = int(PREFIX[i]) + W
            b.req_to_token[row, :length] = slots[i, :length].int()
            pool.set_kv_buffer(
                layer, slots[i, :length], k[i, :length].clone(), v[i, :length].clone(),
                layer.k_scale, layer.v_scale,
            )  # fmt: skip
        return b

    decode_backend = backend()
    rows = torch.empty(len(PREFIX), W, S.heads * S.dim, dtype=torch.bfloat16)
    with recorded_launches(*_decode_kernels()) as decode_launches:
        for j in range(W):
            seq_lens = PREFIX + j + 1
            loc = slots[torch.arange(len(PREFIX)), seq_lens.long() - 1]
            fb = decode_batch(REQ_ROWS, seq_lens, loc)
            decode_backend.init_forward_metadata(fb)
            rows[:, j] = decode_backend.forward_decode(
                q[:, j], None, None, layer, fb, save_kv_cache=False, sinks=sinks
            )

    verify_backend = backend()
    draft_locs = torch.cat([slots[i, int(p) : int(p) + W] for i, p in enumerate(PREFIX)])
    fb = verify_batch(REQ_ROWS, PREFIX, draft_locs, W)
    verify_backend.init_forward_metadata(fb)
    with recorded_launches(*_decode_kernels()) as verify_launches:
        out = verify_backend.forward_extend(
            q.reshape(-1, S.heads * S.dim), None, None, layer, fb, save_kv_cache=False,
            sinks=sinks,
        )  # fmt: skip

    assert torch.equal(out, rows.reshape(-1, S.heads * S.dim))

    def launched(launches):
        return {(x.kernel, x.constexprs, x.scalars) for x in launches}

    assert verify_launches, "verify launched no decode kernel"
    assert launched(verify_launches) == launched(decode_launches)
    # The case is live: the argument it is about reaches decode's own launches.
    constexprs = [dict(x.constexprs) for x in decode_launches]
    scalars = [dict(x.scalars) for x in decode_launches]
    if name == "paged-16":
        assert {c.get("PAGE_SIZE") for c in constexprs} == {16, None}  # stage 2 has none
    if name == "sinks":
        assert any(c.get("HAS_SINK") for c in constexprs)
    if name == "fp8-e4m3-kv-scales":
        assert 1.5 in {s.get("v_scale") for s in scalars}
        assert layer.scaling * 0.75 in {s.get("sm_scale_withk") for s in scalars}


def _blocker(attn_type, ragged_mode: str = "static"):
    """What the backend's start-up check names for a linear-chain target (DSpark)
    whose one attention layer has ``attn_type``."""
    from types import SimpleNamespace

    from sglang.srt.environ import envs
    from sglang.srt.layers.radix_attention import RadixAttention
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    model = torch.nn.Sequential(
        RadixAttention(S.heads, S.dim, S.dim**-0.5, S.kv_heads, layer_id=0, attn_type=attn_type)
    )
    runner = SimpleNamespace(
        spec_algorithm=SpeculativeAlgorithm.from_string("DSPARK"),
        model_config=SimpleNamespace(is_encoder_decoder=False),
        model=model,
    )
    backend = make_backend(S, num_tokens_per_req=W, verify_as_decode=False)
    backend.sliding_window_size = None
    with envs.SGLANG_RAGGED_VERIFY_MODE.override(ragged_mode):
        return backend._verify_as_decode_blocker(runner)


def test_start_up_check_names_what_keeps_verify_on_the_extend_kernel(sglang_tree):
    """The rows replace the prefix the extend kernel reads, so a non-causal layer
    (which would fall back to it) and a ragged verify (rows of unequal width)
    keep the extend kernel; a causal decoder with a static verify takes the route."""
    from sglang.srt.layers.radix_attention import AttentionType

    assert _blocker(AttentionType.DECODER) is None
    assert _blocker(AttentionType.DECODER_BIDIRECTIONAL) == "non-causal attention layers"
    assert _blocker(AttentionType.ENCODER_ONLY) == "non-causal attention layers"
    assert "ragged verify" in _blocker(AttentionType.DECODER, ragged_mode="compact")


@pytest.mark.slow
def test_registered_backend_test_passes_on_cpu(sglang_tree):
    """Every case of the registered test, on CPU: the backend built by ``__init__``
    for a deterministic EAGLE target, verify rows bitwise equal to its
    ``forward_decode`` eagerly in one launch, in launches of a pool smaller than
    the rows, without host lengths (the index stream bounded by
    ``max_seq_len_host``), and through the CUDA-graph metadata with padded requests.
    The shapes span two split tiles; GQA and MHA; slot-based and paged (16-token
    pages) KV pools (the test's own PAGE_SIZES). Also eagerly over an FP8 E4M3 KV
    cache with layer scales and with attention sinks, and every decode-kernel launch
    of verify with decode's arguments (page size, scales, sinks), seen through a
    wrapped ``decode_attention_fwd``."""
    run = run_registered(
        sglang_tree,
        "test/registered/unit/layers/attention/test_triton_verify_as_decode.py",
        {
            "TestTritonVerifyAsDecode": {
                "DEVICE": "cpu",
                "CONTEXT_LEN": 320,
                "SHAPES": [[4, 2, 16, [37, 254, 1], 3], [2, 2, 16, [255, 5], 2]],
                "GRAPH_PADDING": 2,
            }
        },
    )
    assert run.ran == 7, run.output[-4000:]
    assert not run.failed, (run.failed, run.output[-8000:])
    assert not run.skipped, run.skipped
