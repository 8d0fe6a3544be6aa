"""The real TritonAttnBackend on a real KV pool, as the server stack builds it, for one layer.

The backend, its layer and its forward batches come from
``gdn_parity.drift.model.server.backends`` (which sets every attribute
``__init__`` would derive, without a ModelRunner), for a one-attention-layer
model of ``AttnShape``'s geometry under deterministic inference. A test picks
the verify path it studies with ``verify_as_decode`` and ``read_kv_once``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gdn_parity.drift.model.config import ModelConfig
from gdn_parity.drift.model.server import backends
from gdn_parity.drift.model.server.numerics import ServerNumerics


@dataclass(frozen=True)
class AttnShape:
    heads: int = 4
    kv_heads: int = 2
    dim: int = 16
    context: int = 320  # spans two split tiles
    slots: int = 2048
    req_rows: int = 8

    @property
    def config(self) -> ModelConfig:
        """A model whose one full-attention layer (the fourth) has this geometry."""
        return ModelConfig(
            name="attn-rig", hidden=64, layers=4, intermediate=128, gdn_k_heads=1,
            gdn_v_heads=2, gdn_head_dim=16, attn_heads=self.heads,
            attn_kv_heads=self.kv_heads, attn_head_dim=self.dim,
        )  # fmt: skip


def make_layer(s: AttnShape):
    """The attributes of a RadixAttention that the Triton backend reads."""
    return backends.attention_layer(0, s.config)


def make_backend(
    s: AttnShape,
    *,
    num_tokens_per_req: int,
    verify_as_decode: bool,
    read_kv_once: bool = True,
    kv_dtype: torch.dtype = torch.bfloat16,
    page_size: int = 1,
):
    """A TritonAttnBackend for the target model under deterministic inference.

    ``verify_as_decode`` True is what ``__init__`` derives for a speculative target
    in a tree with patch 0008; False is the backend's previous verify path. Its rows
    run in the one-read kernel (``__init__``'s choice on CUDA over a plain pool), or
    with ``read_kv_once`` False one decode row each (ROCm, a translating pool). The KV
    pool holds ``kv_dtype`` (``torch.float8_e4m3fn``: sglang's FP8 E4M3 KV cache) in
    pages of ``page_size`` tokens, read through a translator of that page size.
    """
    backend = backends.triton_attention_backend(
        s.config,
        # the flag asks for verify as decode rows; the rig then sets the route itself
        ServerNumerics.of_server(deterministic=True, exact_parity=True),
        kv_slots=s.slots,
        req_rows=s.req_rows,
        context=s.context,
        num_tokens_per_req=num_tokens_per_req,
        dtype=kv_dtype,
        device="cpu",
    )
    if page_size != 1:
        from sglang.srt.mem_cache.kv_index_translator import KVIndexTranslator
        from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool

        pool = MHATokenToKVPool(
            size=s.slots,
            page_size=page_size,
            dtype=kv_dtype,
            head_num=s.kv_heads,
            head_dim=s.dim,
            layer_num=1,
            device="cpu",
            enable_memory_saver=False,
            enable_alt_stream=False,
        )
        backend.token_to_kv_pool = pool
        backend.kv_index_translator = KVIndexTranslator(
            req_to_token=backend.req_to_token,
            token_to_kv_pool_allocator=None,
            token_to_kv_pool=pool,
            page_size=page_size,
            device="cpu",
        )
        backend.page_size = page_size
    backend.verify_as_decode = verify_as_decode
    backend.verify_rows_read_kv_once = verify_as_decode and read_kv_once
    return backend


def decode_batch(req_pool_indices, seq_lens, out_cache_loc):
    return backends.forward_batch("decode", req_pool_indices, seq_lens, out_cache_loc, 1)


def verify_batch(req_pool_indices, seq_lens, out_cache_loc, num_tokens_per_req):
    """A TARGET_VERIFY batch: ``seq_lens`` are the committed lengths (drafts excluded)."""
    return backends.forward_batch(
        "verify", req_pool_indices, seq_lens, out_cache_loc, num_tokens_per_req
    )
