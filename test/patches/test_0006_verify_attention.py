"""Patch 0006: deterministic TARGET_VERIFY on the Triton backend equals Base decode, bitwise.

The real ``TritonAttnBackend`` (``triton_attn_rig``: no ``__init__``, real pool,
translator and kernels) computes, through its own ``init_forward_metadata``
and ``forward_decode``, what Base decode produces at every position of a
request, one token at a time. The same positions are then verified in one
TARGET_VERIFY forward through ``forward_extend``: eagerly, and through the
CUDA-graph metadata path (``init_cuda_graph_state`` then
``init_forward_metadata_out_graph``) with the batch padded as a graph pads it.
Every verify row must equal decode's row bitwise. The backend's previous verify
path (the unified extend kernel) is the negative control.
"""

from __future__ import annotations

import pytest
import torch

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
    """The cache as a verify step sees it: prefix and draft K/V written, table filled."""
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


def _verify_eager(case, verify_as_decode: bool) -> torch.Tensor:
    slots, k, v, q = case
    backend = make_backend(S, num_tokens_per_req=W, verify_as_decode=verify_as_decode)
    _fill_cache(backend, slots, k, v)
    fb = verify_batch(REQ_ROWS, PREFIX, _draft_locs(slots), W)
    backend.init_forward_metadata(fb)
    return backend.forward_extend(
        q.reshape(-1, S.heads * S.dim), None, None, make_layer(S), fb, save_kv_cache=False
    )


def _verify_graph_path(case, pad: int) -> torch.Tensor:
    """The CUDA-graph metadata path: buffers sized for a larger batch, ``pad``
    padded requests (seq_len 1, request row 0, out_cache_loc 0) as the graph
    runner pads them. The padded rows' outputs are discarded."""
    slots, k, v, q = case
    n = len(PREFIX)
    backend = make_backend(S, num_tokens_per_req=W, verify_as_decode=True)
    _fill_cache(backend, slots, k, v)
    backend.init_cuda_graph_state(max_bs=n + pad + 1, max_num_tokens=(n + pad + 1) * W)
    seq_lens = torch.cat([PREFIX, torch.ones(pad, dtype=torch.int32)])
    rows = torch.cat([REQ_ROWS, torch.zeros(pad, dtype=torch.int64)])
    locs = torch.cat([_draft_locs(slots), torch.zeros(pad * W, dtype=torch.int64)])
    fb = verify_batch(rows, seq_lens, locs, W)
    backend.init_forward_metadata_out_graph(fb, in_capture=True)
    q_padded = torch.cat(
        [
            q.reshape(-1, S.heads * S.dim),
            torch.zeros(pad * W, S.heads * S.dim, dtype=torch.bfloat16),
        ]
    )
    out = backend.forward_extend(q_padded, None, None, make_layer(S), fb, save_kv_cache=False)
    return out[: n * W]


def test_eager_verify_rows_equal_decode(case):
    assert torch.equal(_verify_eager(case, verify_as_decode=True), _base_decode(case))


def test_graph_path_with_padded_rows_equals_decode(case):
    assert torch.equal(_verify_graph_path(case, pad=2), _base_decode(case))


def test_previous_verify_path_differs_from_decode(case):
    """Negative control: the unified extend kernel is not decode's arithmetic."""
    extend, decode = _verify_eager(case, verify_as_decode=False), _base_decode(case)
    assert not torch.equal(extend, decode)
    # ...but it attends over the same keys: the rows agree to bf16 rounding.
    torch.testing.assert_close(extend, decode, atol=2e-2, rtol=2e-2)
