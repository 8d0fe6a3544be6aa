"""Patch 0008: deterministic TARGET_VERIFY on the Triton backend equals Base decode, bitwise.

Verify token ``j`` of a request with ``L`` committed tokens is the decode row at KV
length ``L + j + 1``. ``verify_decode_attention_fwd`` computes a request's rows in
one stage-1 kernel that reads each KV block once, then decode's own stage 2.

Under the Triton interpreter (a control of the arithmetic order, not GPU evidence):

- the kernel against ``decode_attention_fwd`` on the same KV cache, rows and split
  counts: the outputs, and every split's partial (``attn_logits``, ``attn_lse``),
  bitwise, with the splits decode leaves unwritten unwritten; GQA and MHA, lengths
  below, on and across decode's split-length changes (two split tiles), 2 to 9
  rows per request, FP8 KV with scales, 16-token pages, sinks, a logit cap, the
  xAI temperature and a score_mod. Two kernels changed on purpose (another block
  size, the longest row's split length for every row) differ from decode;
- ``split_group_keys`` and ``max_split_groups`` against split lengths derived by hand;
- the real ``TritonAttnBackend`` (``triton_attn_rig``): Base decode, one token at a
  time through ``forward_decode``, against one TARGET_VERIFY forward, eagerly (in
  one launch and in launches of whole requests) and through the CUDA-graph
  metadata path with padded requests; what verify allocates (nothing sized by the
  context) and launches (decode's compile-time arguments); the per-row decode
  launches that ROCm and translating pools keep; the opt-out;
- the patch's registered CUDA test, at tiny shapes.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
import triton
import triton.language as tl
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from helpers.launches import recorded_launches
from helpers.registered import run_registered
from helpers.triton_attn_rig import AttnShape, decode_batch, make_backend, make_layer, verify_batch

S = AttnShape()
W = 3  # verify tokens per request (2 drafts + the bonus row)
# Committed lengths: one short, one whose verify rows cross the first split tile.
PREFIX = torch.tensor([37, 254], dtype=torch.int32)
REQ_ROWS = torch.tensor([3, 1], dtype=torch.int64)


# --- the kernel against decode's ----------------------------------------------


@dataclass(frozen=True)
class KernelCase:
    heads: int
    kv_heads: int
    prefix: tuple[int, ...]
    rows: int  # verify tokens per request
    split_tile: int = 256  # decode's splits: ceil(n / split_tile)
    dim: int = 16
    kv_dtype: torch.dtype = torch.bfloat16
    page_size: int = 1
    logit_cap: float = 0.0
    sinks: bool = False
    xai_temperature_len: int = -1
    score_mod: bool = False


GQA, MHA = (4, 2), (2, 2)
# Split tile 128: a row of n tokens has one split up to 128 tokens, then splits of
# 96 (from 129), 128 (193), 96 (257), 128 (289), and of 128 from 289 on.
ACROSS_128 = (1, 17, 126, 127, 128, 190, 191, 192, 254, 255, 256, 286, 287, 288)
KERNEL_CASES = {
    "gqa-across-split-changes": KernelCase(*GQA, ACROSS_128, 3, split_tile=128),
    "mha-across-split-changes": KernelCase(*MHA, ACROSS_128, 3, split_tile=128),
    "gqa-9-rows": KernelCase(*GQA, (120, 185, 250, 281), 9, split_tile=128),
    "mha-9-rows": KernelCase(*MHA, (120, 185, 250, 281), 9, split_tile=128),
    "gqa-2-rows-default-tile": KernelCase(*GQA, (254, 255, 318, 319), 2),
    # A kv group wider than the grouped kernel's 16-head tile: two tiles per KV head.
    "gqa-two-head-tiles": KernelCase(40, 2, (126, 191), 3, split_tile=128),
    "gqa-fp8-paged-sinks-cap": KernelCase(
        *GQA, (126, 191), 3, split_tile=128, kv_dtype=torch.float8_e4m3fn,
        page_size=16, logit_cap=5.0, sinks=True,
    ),
    "mha-fp8-paged-sinks-cap": KernelCase(
        *MHA, (126, 191), 3, split_tile=128, kv_dtype=torch.float8_e4m3fn,
        page_size=16, logit_cap=5.0, sinks=True,
    ),
    "mha-xai-temperature": KernelCase(*MHA, (126, 191), 3, split_tile=128, xai_temperature_len=64),
    "gqa-score-mod": KernelCase(*GQA, (126, 191), 3, split_tile=128, score_mod=True),
}  # fmt: skip


def _kernel_rows(c: KernelCase, verify=None, split_groups: int | None = None):
    """Decode's rows and partials, and the one-read kernel's (``verify``: the
    launcher, the tree's by default), on one cache: ((out, logits, lse), (...))."""
    from sglang.kernels.ops.attention.decode_attention import decode_attention_fwd
    from sglang.kernels.ops.attention.score_mod import relative_bias_score_mod
    from sglang.kernels.ops.attention.verify_decode_attention import (
        max_split_groups,
        verify_decode_attention_fwd,
    )

    verify = verify or verify_decode_attention_fwd
    gen = torch.Generator().manual_seed(sum(c.prefix) + c.rows)
    n_req, context = len(c.prefix), max(c.prefix) + c.rows
    slots = n_req * context + c.page_size
    k_buf = torch.randn(slots + c.page_size, c.kv_heads, c.dim, generator=gen)
    v_buf = torch.randn(slots + c.page_size, c.kv_heads, c.dim, generator=gen)
    k_buf, v_buf = k_buf.to(c.kv_dtype), v_buf.to(c.kv_dtype)
    # Each request's slots: whole pages, scattered, slot 0 left out.
    per_req = -(-context // c.page_size)
    pages = torch.randperm(slots // c.page_size, generator=gen)[: n_req * per_req]
    ids = ((pages[:, None] + 1) * c.page_size + torch.arange(c.page_size)).view(n_req, -1)
    req_to_token = torch.zeros(n_req + 2, context, dtype=torch.int32)
    req_pool_indices = torch.arange(n_req, 0, -1)  # out of table order
    req_to_token[req_pool_indices] = ids[:, :context].int()
    lens = (torch.tensor(c.prefix)[:, None] + torch.arange(1, c.rows + 1)).reshape(-1)
    rows = len(lens)
    indptr = torch.zeros(rows + 1, dtype=torch.int32)
    indptr[1:] = torch.cumsum(lens, 0)
    splits = ((lens + c.split_tile - 1) // c.split_tile).int()
    max_splits = int(splits.max())
    q = (4 * torch.randn(rows, c.heads, c.dim, generator=gen)).bfloat16()
    sinks = torch.linspace(-1.0, 2.0, c.heads).bfloat16() if c.sinks else None
    score = {}
    if c.score_mod:
        aux = torch.randn(rows, c.heads, 8, generator=gen)
        score = dict(score_mod=relative_bias_score_mod, aux_tensors=[aux])
    common = dict(
        logit_cap=c.logit_cap,
        sinks=sinks,
        xai_temperature_len=c.xai_temperature_len,
        page_size=c.page_size,
        **score,
    )

    def buffers():
        out = torch.full((rows, c.heads, c.dim), float("nan")).bfloat16()
        logits = torch.full((rows, c.heads, max_splits, c.dim), float("nan"))
        return out, logits, torch.full((rows, c.heads, max_splits), float("nan"))

    # Decode: each row a decode row over its own ids, plain torch's CSR of them.
    table_rows = req_to_token[req_pool_indices.repeat_interleave(c.rows)]
    kv_indices = torch.cat([table_rows[r, : int(lens[r])].long() for r in range(rows)])
    decode = buffers()
    decode_attention_fwd(
        q, k_buf, v_buf, decode[0], indptr, kv_indices, decode[1], decode[2], splits,
        max_splits, c.dim**-0.5, 0.75, 1.5, enable_lean=False, **common,
    )  # fmt: skip
    groups = split_groups or max_split_groups(
        lambda n: (n + c.split_tile - 1) // c.split_tile, context, c.rows
    )
    rows_out = buffers()
    verify(
        q, k_buf, v_buf, rows_out[0], req_to_token, req_pool_indices, indptr, splits,
        rows_out[1], rows_out[2], max_splits, c.rows, groups, c.dim**-0.5, 0.75, 1.5,
        **common,
    )  # fmt: skip
    return decode, rows_out


def _bitwise(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal bits, NaN (an unwritten split) where the other is NaN."""
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())


@pytest.mark.parametrize("name", list(KERNEL_CASES))
def test_kernel_rows_and_partials_are_decodes(sglang_tree, name):
    """Every row's output, and each of its splits' partials, bitwise decode's; a
    split decode does not have for a row (a longer row's) is not written for it."""
    (out, logits, lse), (v_out, v_logits, v_lse) = _kernel_rows(KERNEL_CASES[name])
    assert torch.equal(v_out, out)
    assert _bitwise(v_lse, lse)
    assert _bitwise(v_logits, logits)
    assert lse.isnan().any() and not lse[:, :, 0].isnan().any()  # the case has empty splits


def _partials_differ(rows) -> bool:
    (_, logits, lse), (_, v_logits, v_lse) = rows
    return not (_bitwise(v_logits, logits) and _bitwise(v_lse, lse))


@pytest.mark.parametrize("name", ["gqa-across-split-changes", "mha-across-split-changes"])
def test_another_block_size_is_not_decodes(sglang_tree, monkeypatch, name):
    """Control: the bitwise comparison sees a change of the block order inside a
    split (blocks of half decode's size)."""
    from sglang.kernels.ops.attention import verify_decode_attention as kernel

    monkeypatch.setattr(kernel, "_GROUPED_BLOCK_N", 16)
    monkeypatch.setattr(kernel, "_NORMAL_BLOCK_N", 32)
    rows = _kernel_rows(KERNEL_CASES[name])
    assert _partials_differ(rows)
    (out, _, _), (v_out, _, _) = rows
    torch.testing.assert_close(v_out, out, atol=2e-2, rtol=2e-2)  # the same attention


@triton.jit
def _one_group_row_split(row_kv_indptr, num_kv_splits, row, MIN_BLOCK_KV: tl.constexpr):
    """The kernel's ``_row_split`` with one group key for every row."""
    kv_len = tl.load(row_kv_indptr + row + 1) - tl.load(row_kv_indptr + row)
    kv_splits = tl.load(num_kv_splits + row)
    per_split = tl.cdiv(tl.cdiv(kv_len, kv_splits), MIN_BLOCK_KV) * MIN_BLOCK_KV
    return kv_len, per_split, 0


@pytest.mark.parametrize("name", ["gqa-across-split-changes", "mha-across-split-changes"])
def test_the_longest_rows_split_length_is_not_decodes(sglang_tree, monkeypatch, name):
    """Control: every row of a request in one group, split at the longest row's
    split length (ignoring where decode's split length changes), differs."""
    from sglang.kernels.ops.attention import verify_decode_attention as kernel

    monkeypatch.setattr(kernel, "_row_split", _one_group_row_split)
    assert _partials_differ(_kernel_rows(KERNEL_CASES[name]))


def test_split_group_keys_are_decodes_split_lengths(sglang_tree):
    """Decode's split length at the default tile (256), derived by hand: one split
    up to 256 tokens (key 0), then ceil32(ceil(n / ceil(n / 256)))."""
    from sglang.kernels.ops.attention.verify_decode_attention import split_group_keys

    hand = {1: 0, 256: 0, 257: 160, 320: 160, 321: 192, 384: 192, 385: 224, 449: 256,
            512: 256, 513: 192, 1536: 256, 1537: 224, 1568: 224, 1569: 256, 4096: 256}  # fmt: skip
    n = torch.tensor(list(hand))
    assert split_group_keys(n, (n + 255) // 256).tolist() == list(hand.values())


@pytest.mark.parametrize(
    ("rows", "groups"),
    # Change points of the default tile's split length 64 apart or more, except
    # 1537 (224) and 1569 (256): 34 rows from 1536 hold 256, 224 and 256.
    [(1, 1), (2, 2), (9, 2), (33, 2), (34, 3)],
)
def test_split_groups_per_request(sglang_tree, rows, groups):
    from sglang.kernels.ops.attention.verify_decode_attention import max_split_groups

    assert max_split_groups(lambda n: (n + 255) // 256, 4096, rows) == groups


@pytest.mark.parametrize(
    ("prefix", "rows", "reads"),
    # From 1569 tokens on every row's splits are 256 tokens: one split group, one read.
    # (126, 254) at 4 rows: 127-130 hold one split; 255-256 one, 257-258 splits of 160.
    [((1600, 2047), 4, 1), ((1600, 2047), 9, 1), ((126, 254), 4, 2)],
)
def test_the_kernel_loads_each_kv_element_once_per_split_group(
    sglang_tree, monkeypatch, prefix, rows, reads
):
    """What stage 1 loads from the K and V pools (issued loads, counted under the
    interpreter): every element of a request's rows at most ``reads`` times, the
    request's split groups; from 1569 tokens on exactly once, all rows of the
    request together. Decode's rows, one launch per row as before this kernel,
    load the prefix once per row."""
    from sglang.kernels.ops.attention import decode_attention
    from sglang.kernels.ops.attention.verify_decode_attention import verify_decode_attention_fwd

    from helpers.loads import counted_loads

    counts = {}

    def counting(name, launcher):
        def launch(q, k_buf, v_buf, *args, **kwargs):
            with counted_loads(k_buf, v_buf) as loads:
                launcher(q, k_buf, v_buf, *args, **kwargs)
            counts[name] = loads

        return launch

    monkeypatch.setattr(
        decode_attention,
        "decode_attention_fwd",
        counting("decode", decode_attention.decode_attention_fwd),
    )
    case = KernelCase(*GQA, prefix, rows)
    (out, _, _), (v_out, _, _) = _kernel_rows(case, counting("verify", verify_decode_attention_fwd))
    assert torch.equal(v_out, out)
    # One read: each request's tokens up to its longest row, every KV head, every dim.
    one_read = sum(length + rows for length in prefix) * case.kv_heads * case.dim
    per_row = sum(length + j for length in prefix for j in range(1, rows + 1))
    for pool in (0, 1):  # K, then V
        verify, decode = counts["verify"][pool], counts["decode"][pool]
        assert verify.distinct == one_read
        assert max(verify.times.values()) == reads
        assert decode.elements == per_row * case.kv_heads * case.dim


# --- the backend: verify against decode ---------------------------------------


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


def _fill_cache(backend, slots, k, v, prefix=PREFIX):
    """The cache as a verify step sees it: prefix and draft K/V written, and the
    drafts' slots in ``req_to_token`` after the prefix, where the draft step puts them."""
    kbuf, vbuf = backend.token_to_kv_pool.get_kv_buffer(0)
    for i, row in enumerate(REQ_ROWS):
        length = int(prefix[i]) + W
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


def _draft_locs(slots: torch.Tensor, prefix=PREFIX) -> torch.Tensor:
    return torch.cat([slots[i, int(p) : int(p) + W] for i, p in enumerate(prefix)])


def _verify_backend(case, verify_as_decode: bool, read_kv_once: bool = True, prefix=PREFIX):
    slots, k, v, _ = case
    backend = make_backend(
        S, num_tokens_per_req=W, verify_as_decode=verify_as_decode, read_kv_once=read_kv_once
    )
    _fill_cache(backend, slots, k, v, prefix)
    return backend


def _verify_eager(case, backend, prefix=PREFIX) -> torch.Tensor:
    slots, _, _, q = case
    fb = verify_batch(REQ_ROWS, prefix, _draft_locs(slots, prefix), W)
    backend.init_forward_metadata(fb)
    return backend.forward_extend(
        q.reshape(-1, S.heads * S.dim), None, None, make_layer(S), fb, save_kv_cache=False
    )


def _attention_kernels():
    """Decode's stage-1 and stage-2 kernels and the one-read stage-1 kernels."""
    from sglang.kernels.ops.attention import decode_attention as d
    from sglang.kernels.ops.attention import verify_decode_attention as v

    return (
        d._fwd_kernel_stage1,
        d._fwd_grouped_kernel_stage1,
        d._fwd_kernel_stage2,
        v._verify_rows_kernel_stage1,
        v._verify_rows_grouped_kernel_stage1,
    )


def test_eager_verify_rows_equal_decode_in_the_one_read_kernel(case):
    backend = _verify_backend(case, verify_as_decode=True)
    with recorded_launches(*_attention_kernels()) as launches:
        out = _verify_eager(case, backend)
    assert torch.equal(out, _base_decode(case))
    # One stage-1 launch of the one-read kernel, then decode's stage 2.
    assert [x.kernel for x in launches] == [
        "_verify_rows_grouped_kernel_stage1",
        "_fwd_kernel_stage2",
    ]
    assert backend.forward_metadata.kv_indices is None


def test_eager_launches_of_whole_requests_equal_decode(case):
    """With fewer rows in the request pool than verify has, eager verify launches
    whole requests at a time, with split buffers of that many requests' rows."""
    backend = _verify_backend(case, verify_as_decode=True)
    backend.verify_as_decode_chunk_rows = W + 1  # room for one request's rows
    with recorded_launches(*_attention_kernels()) as launches:
        out = _verify_eager(case, backend)
    assert backend.forward_metadata.attn_logits.shape[0] == W
    assert len(launches) == 2 * len(PREFIX)
    assert torch.equal(out, _base_decode(case))


@pytest.mark.parametrize("read_kv_once", [True, False])
def test_launches_of_whole_requests_take_their_rows_of_a_score_mods_aux(case, read_kv_once):
    """A score_mod's aux tensor has a row per verify token, and its kernels index it by
    the launch's rows: each launch of a request gets that request's aux rows, as decode
    of each token gets the token's."""
    from sglang.kernels.ops.attention.score_mod import relative_bias_score_mod

    slots, k, v, q = case
    aux = torch.randn(len(PREFIX) * W, S.heads, 8, generator=torch.Generator().manual_seed(8))
    score = dict(score_mod=relative_bias_score_mod)
    decode_backend = make_backend(S, num_tokens_per_req=W, verify_as_decode=True)
    _fill_cache(decode_backend, slots, k, v)
    rows = torch.empty(len(PREFIX), W, S.heads * S.dim, dtype=torch.bfloat16)
    for j in range(W):
        seq_lens = PREFIX + j + 1
        fb = decode_batch(REQ_ROWS, seq_lens, slots[torch.arange(len(PREFIX)), seq_lens.long() - 1])
        decode_backend.init_forward_metadata(fb)
        rows[:, j] = decode_backend.forward_decode(
            q[:, j], None, None, make_layer(S), fb, save_kv_cache=False,
            aux_tensors=[aux.view(len(PREFIX), W, S.heads, 8)[:, j]], **score,
        )  # fmt: skip
    backend = _verify_backend(case, verify_as_decode=True, read_kv_once=read_kv_once)
    backend.verify_as_decode_chunk_rows = W + 1  # one request's rows per launch
    fb = verify_batch(REQ_ROWS, PREFIX, _draft_locs(slots), W)
    backend.init_forward_metadata(fb)
    out = backend.forward_extend(
        q.reshape(-1, S.heads * S.dim), None, None, make_layer(S), fb, save_kv_cache=False,
        aux_tensors=[aux], **score,
    )  # fmt: skip
    assert torch.equal(out, rows.reshape(-1, S.heads * S.dim))


def test_graph_path_with_padded_rows_equals_decode(case):
    """The CUDA-graph metadata path: buffers sized for a larger batch, two padded
    requests (seq_len 1, request row 0, out_cache_loc 0) as the graph runner pads
    them. The padded rows' outputs are discarded."""
    slots, _, _, q = case
    n, pad = len(PREFIX), 2
    backend = _verify_backend(case, verify_as_decode=True)
    backend.init_cuda_graph_state(max_bs=n + pad + 1, max_num_tokens=(n + pad + 1) * W)
    seq_lens = torch.cat([PREFIX, torch.ones(pad, dtype=torch.int32)])
    rows = torch.cat([REQ_ROWS, torch.zeros(pad, dtype=torch.int64)])
    locs = torch.cat([_draft_locs(slots), torch.zeros(pad * W, dtype=torch.int64)])
    fb = verify_batch(rows, seq_lens, locs, W)
    backend.init_forward_metadata_out_graph(fb, in_capture=True)
    row_lens = (seq_lens[:, None] + torch.arange(1, W + 1)).reshape(-1)
    md = backend.forward_metadata
    assert torch.equal(md.kv_indptr[1:], torch.cumsum(row_lens, 0).int())
    q_padded = torch.cat(
        [q.reshape(-1, S.heads * S.dim), torch.zeros(pad * W, S.heads * S.dim).bfloat16()]
    )
    out = backend.forward_extend(q_padded, None, None, make_layer(S), fb, save_kv_cache=False)
    assert torch.equal(out[: n * W], _base_decode(case))


def _graph_bytes(case, verify_as_decode: bool, read_kv_once: bool = True) -> int:
    backend = _verify_backend(case, verify_as_decode, read_kv_once)
    backend.init_cuda_graph_state(max_bs=4, max_num_tokens=4 * W)
    return sum(
        t.numel() * t.element_size()
        for name, t in vars(backend).items()
        if name.startswith("cuda_graph_") and isinstance(t, torch.Tensor)
    )


def test_graph_state_adds_the_rows_indptr_only(case):
    """Against the previous verify path, the route's CUDA-graph state adds the
    rows' kv_indptr (one int32 per verify token, and one); decode launches per
    row also grow the index buffer by the drafts' ``1 + ... + W`` ids per request."""
    before = _graph_bytes(case, verify_as_decode=False)
    assert _graph_bytes(case, verify_as_decode=True) - before == (4 * W + 1) * 4
    per_row = _graph_bytes(case, verify_as_decode=True, read_kv_once=False)
    assert per_row - before == (4 * W + 1) * 4 + 4 * (W * (W + 1) // 2) * 8


class _TensorsMade(TorchDispatchMode):
    """The shape and dtype of every tensor an aten op makes in new memory, outside the
    backend's kernel launches (which allocate none on the GPU; under the
    interpreter they make host copies)."""

    def __init__(self, backend):
        super().__init__()
        self.shapes = []
        self._in_kernel = False
        for name in ("verify_decode_attention_fwd", "decode_attention_fwd"):
            setattr(backend, name, self._unrecorded(getattr(backend, name)))

    def _unrecorded(self, launch):
        def run(*args, **kwargs):
            self._in_kernel = True
            try:
                return launch(*args, **kwargs)
            finally:
                self._in_kernel = False

        return run

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not self._in_kernel:
            # New memory: a storage no input has. A view's _base is not set at this
            # dispatch level (the registered test's recorder took the KV pool's CUDA
            # store-path view of a whole layer for an allocation on an H200).
            held = {
                t.untyped_storage().data_ptr()
                for t in tree_leaves((args, kwargs))
                if isinstance(t, torch.Tensor)
            }
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in held:
                    self.shapes.append((str(func), tuple(t.shape), t.dtype))
        return out


def _tensors_made(case, prefix, read_kv_once: bool) -> list:
    backend = _verify_backend(case, verify_as_decode=True, read_kv_once=read_kv_once, prefix=prefix)
    with _TensorsMade(backend) as made:
        _verify_eager(case, backend, prefix)
    return made.shapes


def test_eager_verify_allocates_nothing_sized_by_the_context(case):
    """The tensors eager verify makes (metadata and forward) are the same for
    committed lengths of 1 and of 37 and 254: none is sized by the context.
    Control: the per-row decode launches' KV id stream is."""
    short = torch.ones(len(PREFIX), dtype=torch.int32)
    made = _tensors_made(case, short, read_kv_once=True)
    assert made == _tensors_made(case, PREFIX, read_kv_once=True)
    largest = max(torch.Size(shape).numel() for _, shape, _ in made)
    attn_logits = len(PREFIX) * W * S.heads * _max_kv_splits() * S.dim
    assert largest == attn_logits  # decode's split buffer for the rows
    assert _tensors_made(case, short, False) != _tensors_made(case, PREFIX, False)


def test_a_view_of_the_kv_pool_is_no_allocation(case, monkeypatch):
    """The KV pool's CUDA store path views each layer's whole K/V buffer, which the
    registered test once took for an allocation (an H200, 2026-12-07). Forced here,
    with an in-place write for its kernel: verify makes what it makes on the CPU path."""
    import sglang.srt.mem_cache.memory_pool as pool

    def store_cache(k, v, k_cache, v_cache, indices, **_):
        k_cache[indices] = k
        v_cache[indices] = v

    cpu_path = _tensors_made(case, PREFIX, read_kv_once=True)
    monkeypatch.setattr(pool, "_is_cuda", True)
    monkeypatch.setattr(pool, "can_use_store_cache", lambda *_: True)
    monkeypatch.setattr(pool, "store_cache", store_cache)
    assert _tensors_made(case, PREFIX, read_kv_once=True) == cpu_path


def _max_kv_splits() -> int:
    return make_backend(S, num_tokens_per_req=W, verify_as_decode=True).max_kv_splits


def test_previous_verify_path_differs_from_decode(case):
    """Negative control: the unified extend kernel is not decode's arithmetic."""
    extend = _verify_eager(case, _verify_backend(case, verify_as_decode=False))
    decode = _base_decode(case)
    assert not torch.equal(extend, decode)
    # ...but it attends over the same keys: the rows agree to bf16 rounding.
    torch.testing.assert_close(extend, decode, atol=2e-2, rtol=2e-2)


def test_per_row_decode_launches_equal_decode(case):
    """ROCm and a translating pool keep one decode row per verify token."""
    backend = _verify_backend(case, verify_as_decode=True, read_kv_once=False)
    with recorded_launches(*_attention_kernels()) as launches:
        out = _verify_eager(case, backend)
    assert torch.equal(out, _base_decode(case))
    assert {x.kernel for x in launches} == {"_fwd_grouped_kernel_stage1", "_fwd_kernel_stage2"}


# --- what a row passes to the kernels besides its KV ids ----------------------

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
# Stage-1 compile-time arguments that pick decode's arithmetic, and the launch's.
STAGE1_SHARED = (
    "BLOCK_DMODEL", "BLOCK_DV", "BLOCK_N", "BLOCK_H", "MIN_BLOCK_KV", "logit_cap", "Lk", "Lv",
    "kv_group_num", "q_head_num", "xai_temperature_len", "PAGE_SIZE", "SCORE_MOD", "USE_PDL",
)  # fmt: skip
LAUNCH = ("num_warps", "num_stages", "sm_scale_withk")


def _paged_slots(gen: torch.Generator, page: int = 16) -> torch.Tensor:
    """Each request's slots, whole pages of consecutive slots as a paged allocator
    gives them (page 0 left out: slot 0 is the padding sink)."""
    n, per_req = len(PREFIX), -(-S.context // page)
    pages = torch.randperm(S.slots // page - 1, generator=gen)[: n * per_req] + 1
    slots = (pages[:, None] * page + torch.arange(page)).view(n, -1)
    return slots[:, : S.context].contiguous()


@pytest.mark.parametrize("name", list(ROW_ARGUMENTS))
def test_verify_rows_pass_decodes_kernel_arguments(case, name):
    """FP8 KV scales, sinks and the pool's page size reach the kernels from
    verify's rows as they do from ``forward_decode``: the rows equal decode's
    bitwise; verify's stage 2 is decode's launch (kernel, compile-time arguments,
    scales), and its stage 1 has decode's stage-1 compile-time arguments, warps,
    stages and softmax scale. On the GPU a compile-time argument picks the binary."""
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
    with recorded_launches(*_attention_kernels()) as decode_launches:
        for j in range(W):
            seq_lens = PREFIX + j + 1
            loc = slots[torch.arange(len(PREFIX)), seq_lens.long() - 1]
            fb = decode_batch(REQ_ROWS, seq_lens, loc)
            decode_backend.init_forward_metadata(fb)
            rows[:, j] = decode_backend.forward_decode(
                q[:, j], None, None, layer, fb, save_kv_cache=False, sinks=sinks
            )

    verify_backend = backend()
    fb = verify_batch(REQ_ROWS, PREFIX, _draft_locs(slots), W)
    verify_backend.init_forward_metadata(fb)
    with recorded_launches(*_attention_kernels()) as verify_launches:
        out = verify_backend.forward_extend(
            q.reshape(-1, S.heads * S.dim), None, None, layer, fb, save_kv_cache=False,
            sinks=sinks,
        )  # fmt: skip

    assert torch.equal(out, rows.reshape(-1, S.heads * S.dim))

    def stage1(launch):
        c, a = dict(launch.constexprs), launch.args
        return {n: c.get(n) for n in STAGE1_SHARED} | {n: a.get(n) for n in LAUNCH}

    def stage2(launches):
        return {(x.kernel, x.constexprs, x.scalars) for x in launches if "stage2" in x.kernel}

    verify_stage1 = [x for x in verify_launches if "stage1" in x.kernel]
    decode_stage1 = [x for x in decode_launches if "stage1" in x.kernel]
    assert [x.kernel for x in verify_stage1] == ["_verify_rows_grouped_kernel_stage1"]
    assert {str(stage1(x)) for x in decode_stage1} == {str(stage1(verify_stage1[0]))}
    assert stage2(verify_launches) == stage2(decode_launches)
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


# --- when verify keeps the extend kernel --------------------------------------


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


@pytest.mark.parametrize(
    ("env", "flag", "asked"), [(False, False, False), (True, False, True), (False, True, True)]
)
def test_verify_as_decode_is_asked_for_by_the_env_or_the_gdn_flag(sglang_tree, env, flag, asked):
    """Opt-in: SGLANG_DETERMINISTIC_VERIFY_AS_DECODE=1, or --gdn-verify-exact-parity,
    whose token identity needs exact attention; neither leaves verify as it was."""
    from sglang.srt.environ import envs
    from sglang.srt.layers.attention.verify_decode_rows import verify_as_decode_requested

    with envs.SGLANG_DETERMINISTIC_VERIFY_AS_DECODE.override(env):
        assert verify_as_decode_requested(flag) is asked


def test_unasked_verify_launches_neither_decode_kernel(case):
    """What a server that does not ask for it keeps: verify on the extend kernel, no
    stage of decode's or of the one-read kernel."""
    backend = _verify_backend(case, verify_as_decode=False)
    with recorded_launches(*_attention_kernels()) as launches:
        _verify_eager(case, backend)
    assert launches == []


# --- the registered CUDA test, on CPU ------------------------------------------


@pytest.mark.slow
def test_registered_backend_test_passes_on_cpu(sglang_tree):
    """Every case of the registered test, on CPU at tiny shapes: the backend built
    by ``__init__`` for a deterministic EAGLE target; verify rows bitwise equal to
    its ``forward_decode`` eagerly in one launch, for every draft count from 1 to
    8, in launches of whole requests, and through the CUDA-graph metadata with
    padded requests; GQA and MHA; slot-based and paged pools; bf16, FP8 with
    scales, sinks and a logit cap; nothing allocated by the context; the per-row
    decode launches with decode's arguments."""
    run = run_registered(
        sglang_tree,
        "test/registered/attention/unittests/dense/test_triton_verify_as_decode.py",
        {
            "TestTritonVerifyAsDecode": {
                "DEVICE": "cpu",
                "CONTEXT_LEN": 336,
                "LENGTHS": [1, 250, 255, 256, 316, 319],
                "SHAPES": [[4, 2, 16, 3], [2, 2, 16, 2]],
                "DRAFT_COUNTS": [1, 4, 8],
                "GRAPH_PADDING": 2,
            }
        },
    )
    assert run.ran == 6, run.output[-4000:]
    assert not run.failed, (run.failed, run.output[-8000:])
    assert not run.skipped, run.skipped
