"""The real TritonAttnBackend on a hand-built real KV pool, without ``__init__``.

``__init__`` needs a ModelRunner (a loaded model, a GPU-sized pool, the runtime
context). Every attribute that ``init_forward_metadata``, the CUDA-graph
metadata path (``init_cuda_graph_state``, ``init_forward_metadata_out_graph``),
``forward_decode`` and ``forward_extend`` read for a plain MHA/GQA target model
is set here to a real sglang object or tensor: an ``MHATokenToKVPool``, a
``KVIndexTranslator`` over a real ``req_to_token`` table, the decode and
extend kernels. Forward batches carry the fields those paths read.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import torch

SPLIT_TILE = 256  # SGLANG_TRITON_DECODE_SPLIT_TILE_SIZE's default


@dataclass(frozen=True)
class AttnShape:
    heads: int = 4
    kv_heads: int = 2
    dim: int = 16
    context: int = 320  # spans two split tiles
    slots: int = 2048
    req_rows: int = 8


def make_layer(s: AttnShape) -> SimpleNamespace:
    """The attributes of a RadixAttention that the Triton backend reads."""
    from sglang.srt.layers.radix_attention import AttentionType

    return SimpleNamespace(
        layer_id=0,
        tp_q_head_num=s.heads,
        tp_k_head_num=s.kv_heads,
        tp_v_head_num=s.kv_heads,
        qk_head_dim=s.dim,
        v_head_dim=s.dim,
        scaling=s.dim**-0.5,
        k_scale=None,
        v_scale=None,
        logit_capping_method="tanh",
        logit_cap=0.0,
        xai_temperature_len=-1,
        sliding_window_size=-1,
        is_cross_attention=False,
        attn_type=AttentionType.DECODER,
    )


def make_backend(s: AttnShape, *, num_tokens_per_req: int, verify_as_decode: bool):
    """A TritonAttnBackend for the target model under deterministic inference.

    ``verify_as_decode`` is what ``__init__`` derives for a speculative target
    whose attention allows it; False is the backend's previous verify path.
    """
    from sglang.kernels.ops.attention.decode_attention import decode_attention_fwd
    from sglang.kernels.ops.attention.extend_attention import (
        build_unified_kv_indices,
        extend_attention_fwd,
        extend_attention_fwd_unified,
    )
    from sglang.srt.layers.attention.triton_backend import TritonAttnBackend
    from sglang.srt.mem_cache.kv_index_translator import KVIndexTranslator
    from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool

    pool = MHATokenToKVPool(
        size=s.slots,
        page_size=1,
        dtype=torch.bfloat16,
        head_num=s.kv_heads,
        head_dim=s.dim,
        layer_num=1,
        device="cpu",
        enable_memory_saver=False,
        enable_alt_stream=False,
    )
    req_to_token = torch.zeros(s.req_rows, s.context, dtype=torch.int32)
    b = TritonAttnBackend.__new__(TritonAttnBackend)
    b.__dict__.update(
        decode_attention_fwd=decode_attention_fwd,
        extend_attention_fwd=extend_attention_fwd,
        extend_attention_fwd_unified=extend_attention_fwd_unified,
        build_unified_kv_indices=build_unified_kv_indices,
        dllm_attention=None,
        skip_prefill=False,
        is_draft_runner=False,
        req_to_token=req_to_token,
        token_to_kv_pool=pool,
        kv_index_translator=KVIndexTranslator(
            req_to_token=req_to_token,
            token_to_kv_pool_allocator=None,
            token_to_kv_pool=pool,
            page_size=1,
            device="cpu",
        ),
        page_size=1,
        device="cpu",
        num_head=s.heads,
        num_kv_head=s.kv_heads,
        v_head_dim=s.dim,
        swa_v_head_dim=None,
        max_context_len=s.context,
        sliding_window_size=None,
        use_sliding_window_kv_pool=False,
        window_kv_indptr=None,
        use_mla=False,
        dcp_size=1,
        use_pdl=False,
        use_verify_splitkv=False,
        use_verify_shared_kv=False,
        use_dense_fp8_chunked_prefill=False,
        enable_lean_attention=False,
        lean_total_programs=1,
        lean_block_m=16,
        enable_deterministic=True,
        static_kv_splits=False,
        device_core_count=132,
        split_tile_size=SPLIT_TILE,
        max_kv_splits=-(-s.context // SPLIT_TILE),
        num_draft_tokens=num_tokens_per_req,
        target_verify_num_tokens_per_req=num_tokens_per_req,
        topk=1,
        verify_as_decode=verify_as_decode,
        verify_as_decode_chunk_rows=s.req_rows,  # __init__: the request pool size
        kv_indptr=torch.zeros(s.req_rows + 1, dtype=torch.int32),
        qo_indptr=torch.zeros(s.req_rows + 1, dtype=torch.int64),
        mask_indptr=torch.zeros(s.req_rows + 1, dtype=torch.int64),
        forward_metadata=None,
        _verify_mask=None,
        _dense_one_shot_kv_indptr=None,
    )
    return b


def decode_batch(req_pool_indices, seq_lens, out_cache_loc):
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    return SimpleNamespace(
        forward_mode=ForwardMode.DECODE,
        batch_size=len(seq_lens),
        req_pool_indices=req_pool_indices,
        seq_lens=seq_lens,
        seq_lens_sum=int(seq_lens.sum()),
        spec_info=None,
        kv_loc_plan=None,
        out_cache_loc=out_cache_loc,
        encoder_lens=None,
    )


def verify_batch(req_pool_indices, seq_lens, out_cache_loc, num_tokens_per_req):
    """A TARGET_VERIFY batch: ``seq_lens`` are the committed lengths (drafts excluded)."""
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    return SimpleNamespace(
        forward_mode=ForwardMode.TARGET_VERIFY,
        batch_size=len(seq_lens),
        req_pool_indices=req_pool_indices,
        seq_lens=seq_lens,
        seq_lens_sum=int(seq_lens.sum()),
        spec_info=SimpleNamespace(custom_mask=None, num_tokens_per_req=num_tokens_per_req),
        kv_loc_plan=None,
        out_cache_loc=out_cache_loc,
        encoder_lens=None,
        extend_seq_lens=None,
        extend_start_loc=None,
        extend_prefix_lens=None,
        extend_seq_lens_cpu=None,
        mha_one_shot=False,
        attn_attend_prefix_cache=False,
    )
