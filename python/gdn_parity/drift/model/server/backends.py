"""sglang's attention backends on real pools, built as their ``__init__`` builds them for a variant.

``TritonAttnBackend.__init__`` and ``GDNAttnBackend.__init__`` need a
ModelRunner (a loaded model, a GPU-sized pool, the runtime context). Every
attribute their forward paths read for this model is set here to what
``__init__`` derives for the variant's server arguments (deterministic
inference, speculative decoding with a linear draft chain, page size 1) or to
a real sglang object: ``MHATokenToKVPool`` (in the dtype sglang's own
``configure_kv_cache_dtype`` resolves ``--kv-cache-dtype`` to), ``KVIndexTranslator`` over a real
``req_to_token`` table, ``MambaPool.SpeculativeState``, the kernel dispatcher.
``forward_batch`` gives a forward the fields of a ForwardBatch that those paths
read. The forwards themselves (``init_forward_metadata``, ``forward_decode``,
``forward_extend``) are sglang's, unchanged. The CPU tests of patches 0001, 0004
and 0008 build their backends here too.
"""

from __future__ import annotations

import importlib
import types
from types import SimpleNamespace

import torch

from gdn_parity.drift.model.config import ModelConfig
from gdn_parity.drift.model.server.numerics import (
    NUM_KV_SPLITS,
    SM_COUNT,
    SPLIT_TILE,
    ServerNumerics,
)

# The sglang modules this file imports when it first builds a pool. Some modules they import keep
# an import failure in a module global (where torch_memory_saver or deep_ep is missing:
# torch_memory_saver_adapter.import_error, token_dispatcher.deepep._deepep_import_error,
# deepep_v2._deepep_v2_import_error); its traceback keeps the failed import's frame and, through
# f_back, every frame above it. Imported from ServerModel's first pools (speculative_state,
# gdn_backend, _build_pools, __init__), that kept those pools and the first model to the end of
# the process: on an H100, cost at batch 64 ran out of memory in its first verify with the
# first pools (9.5 GiB) still held. ``import_sglang_modules`` imports them first, where the
# stack holds nothing large.
SGLANG_MODULES = (
    "sglang.srt.layers.attention.linear.gdn_backend",
    "sglang.srt.layers.attention.triton_backend",
    "sglang.srt.mem_cache.memory_pool",
)


def import_sglang_modules() -> None:
    """Import ``SGLANG_MODULES`` now: call it before any model exists (``pool.serve`` does)."""
    for name in SGLANG_MODULES:
        importlib.import_module(name)


# sglang's --kv-cache-dtype values the server stack takes: "auto" (the model's dtype, as for a
# checkpoint without kv_cache_quant_algo) and "fp8_e4m3" (torch.float8_e4m3fn).
KV_CACHE_DTYPES = ("auto", "fp8_e4m3")


def kv_cache_dtype(name: str, model_dtype: torch.dtype) -> torch.dtype:
    """The KV pool's dtype for ``--kv-cache-dtype name``, as sglang resolves it: its own
    ``configure_kv_cache_dtype`` (``srt/mem_cache/kv_cache_dtype.py``), called as
    ``ModelRunner.configure_kv_cache_dtype`` calls it for a target runner whose model has no
    quant config (the harness's weights are unquantized): ``auto`` is ``model_dtype``,
    ``fp8_e4m3`` ``torch.float8_e4m3fn`` (``float8_e4m3fnuz`` on ROCm)."""
    if name not in KV_CACHE_DTYPES:
        raise ValueError(f"kv_cache_dtype must be one of {KV_CACHE_DTYPES}, not {name!r}")
    from sglang.srt.mem_cache.kv_cache_dtype import configure_kv_cache_dtype

    _, dtype = configure_kv_cache_dtype(
        server_args_kv_cache_dtype=name,
        model=None,
        model_dtype=model_dtype,
        is_draft_worker=False,
        is_dflash=False,
        speculative_draft_attention_backend=None,
    )
    return dtype


def attention_layer(
    layer_id: int, c: ModelConfig, kv_scale: float | None = None, device: str = "cpu"
) -> SimpleNamespace:
    """The attributes of a RadixAttention that the Triton backend reads.

    ``k_scale``/``v_scale``: None, as ``RadixAttention.__init__`` leaves them for a model
    without a quant config (Qwen3.5's bf16 checkpoints; sglang then stores K/V in an FP8
    pool unscaled and dequantizes with 1.0). ``kv_scale``: what
    ``BaseKVCacheMethod.process_weights_after_loading`` leaves on the layer for a checkpoint
    with that per-tensor scale for K and V: the scales as float32 tensors (the parameters,
    which ``set_kv_buffer`` divides by) and as floats (``k_scale_float``, the kernels'
    descale). 1.0 is a quantized checkpoint without KV scales.
    """
    from sglang.srt.layers.radix_attention import AttentionType

    scale = None if kv_scale is None else torch.tensor(kv_scale, dtype=torch.float32, device=device)
    return SimpleNamespace(
        layer_id=layer_id,
        tp_q_head_num=c.attn_heads,
        tp_k_head_num=c.attn_kv_heads,
        tp_v_head_num=c.attn_kv_heads,
        qk_head_dim=c.attn_head_dim,
        v_head_dim=c.attn_head_dim,
        scaling=c.attn_head_dim**-0.5,
        k_scale=scale,
        v_scale=None if scale is None else scale.clone(),
        k_scale_float=kv_scale,
        v_scale_float=kv_scale,
        logit_capping_method="tanh",
        logit_cap=0.0,
        xai_temperature_len=-1,
        sliding_window_size=-1,
        is_cross_attention=False,
        attn_type=AttentionType.DECODER,
    )


def triton_attention_backend(
    c: ModelConfig,
    numerics: ServerNumerics,
    *,
    kv_slots: int,
    req_rows: int,
    context: int,
    num_tokens_per_req: int,
    dtype: torch.dtype,
    device: str,
):
    """The target model's TritonAttnBackend, with its KV pool and ``req_to_token`` table.

    ``dtype``: the pool's, as ``ModelRunner`` resolves ``--kv-cache-dtype``
    (``kv_cache_dtype``): the model's, or ``torch.float8_e4m3fn``, which
    ``MHATokenToKVPool`` stores as ``uint8`` (its ``store_dtype``) and hands the kernels as
    an FP8 view (``get_key_buffer``). A Qwen3.5 server's pool is a ``HybridLinearKVPool``
    around this same ``MHATokenToKVPool`` (built with ``quant_method=None`` for FP8 on CUDA,
    ``_build_hybrid_linear_kv_pool``), which maps the layer ids and hands it 1.0 for the
    scales the backend leaves None (``HybridLinearKVPool.set_kv_buffer``'s defaults): a
    division by 1.0 before the FP8 cast, which changes no bit.

    ``verify_as_decode`` (patch 0008) is on where ``__init__`` turns it on:
    deterministic inference that asks for it (``numerics.verify_as_decode``) on a
    speculative target, in a tree that has it; so is its one-read kernel
    (``verify_rows_read_kv_once``: CUDA, a plain pool), where the tree has that.
    """
    from sglang.kernels.ops.attention import extend_attention
    from sglang.kernels.ops.attention.decode_attention import (
        _LEAN_BLOCK_M,
        _lean_decode_launch_params,
        decode_attention_fwd,
        lean_capture_policy,
        lean_decode_seqlen_gate,
    )
    from sglang.srt.layers.attention.triton_backend import TritonAttnBackend
    from sglang.srt.mem_cache.kv_index_translator import KVIndexTranslator
    from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool

    layers = len(c.attention_layers)
    pool = MHATokenToKVPool(
        size=kv_slots,
        page_size=1,
        dtype=dtype,
        head_num=c.attn_kv_heads,
        head_dim=c.attn_head_dim,
        layer_num=layers,
        device=device,
        enable_memory_saver=False,
        enable_alt_stream=True,  # a server's without PD multiplexing: V's store beside K's
        # in capture mode, on CUDA
    )
    req_to_token = torch.zeros(req_rows, context, dtype=torch.int32, device=device)
    deterministic = numerics.deterministic_attention
    split_tile = SPLIT_TILE if deterministic else None
    verify_as_decode = numerics.verify_as_decode and hasattr(
        TritonAttnBackend, "_forward_verify_as_decode"
    )
    read_kv_once = verify_as_decode and hasattr(TritonAttnBackend, "_verify_split_groups")
    one_read = {}
    if read_kv_once:
        from sglang.kernels.ops.attention.verify_decode_attention import (
            verify_decode_attention_fwd,
        )

        one_read = dict(
            verify_decode_attention_fwd=verify_decode_attention_fwd,
            _verify_split_groups_by_rows={},
        )
    b = TritonAttnBackend.__new__(TritonAttnBackend)
    b.__dict__.update(
        decode_attention_fwd=decode_attention_fwd,
        extend_attention_fwd=extend_attention.extend_attention_fwd,
        extend_attention_fwd_unified=extend_attention.extend_attention_fwd_unified,
        build_unified_kv_indices=extend_attention.build_unified_kv_indices,
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
            device=device,
        ),
        page_size=1,
        device=device,
        num_head=c.attn_heads,
        num_kv_head=c.attn_kv_heads,
        v_head_dim=c.attn_head_dim,
        swa_v_head_dim=None,
        max_context_len=context,
        sliding_window_size=None,
        use_sliding_window_kv_pool=False,
        window_kv_indptr=None,
        use_mla=False,
        dcp_size=1,
        use_pdl=False,
        use_verify_splitkv=False,  # ROCm only
        use_verify_shared_kv=False,  # ROCm only
        use_dense_fp8_chunked_prefill=False,
        # --enable-lean-attention's default, None: decode picks Lean by the padded batch in
        # graph capture (capture_mode) and by the context in eager forwards; never under
        # deterministic inference
        enable_lean_attention=None,
        _lean_decode_seqlen_gate=lean_decode_seqlen_gate,
        _lean_capture_policy=lean_capture_policy,
        lean_total_programs=_lean_decode_launch_params(
            c.attn_kv_heads, c.attn_heads // c.attn_kv_heads
        )[0],
        lean_block_m=_LEAN_BLOCK_M,
        enable_deterministic=deterministic,
        static_kv_splits=False,
        device_core_count=SM_COUNT,
        split_tile_size=split_tile,
        max_kv_splits=-(-context // SPLIT_TILE) if deterministic else NUM_KV_SPLITS,
        num_draft_tokens=num_tokens_per_req,
        target_verify_num_tokens_per_req=num_tokens_per_req,
        topk=1,
        verify_as_decode=verify_as_decode,
        verify_rows_read_kv_once=read_kv_once,
        **one_read,
        verify_as_decode_chunk_rows=req_rows,  # __init__: the request pool size
        kv_indptr=torch.zeros(req_rows + 1, dtype=torch.int32, device=device),
        qo_indptr=torch.zeros(req_rows + 1, dtype=torch.int64, device=device),
        mask_indptr=torch.zeros(req_rows + 1, dtype=torch.int64, device=device),
        forward_metadata=None,
        _verify_mask=None,
        _dense_one_shot_kv_indptr=None,
    )
    return b


def rotary_cos_sin_cache(c: ModelConfig, positions: int, device: str) -> torch.Tensor:
    """The cos/sin cache ``[positions, rotary_dim]`` of the attention layers' ``get_rope``
    (neox style, ``rotary_dim`` of each head): ``RotaryEmbedding``'s own
    ``_compute_cos_sin_cache``, on ``device`` as a server builds it on the model's device,
    and in fp32 as ``__init__`` keeps it on CUDA. ``__init__`` itself picks a rotary
    kernel, which needs sgl_kernel or vllm here."""
    from sglang.srt.layers.rotary_embedding.base import RotaryEmbedding

    rope = SimpleNamespace(
        base=c.rope_theta,
        rotary_dim=c.rotary_dim,
        max_position_embeddings=positions,
        position_start=0,
        _force_native=False,
    )
    rope._compute_inv_freq = types.MethodType(RotaryEmbedding._compute_inv_freq, rope)
    with torch.device(device):
        return RotaryEmbedding._compute_cos_sin_cache(rope)


def gdn_layer(layer_id: int, c: ModelConfig, w) -> SimpleNamespace:
    """The attributes of a RadixLinearAttention that the GDN backend reads."""
    h, hv, d = c.gdn_k_heads, c.gdn_v_heads, c.gdn_head_dim
    return SimpleNamespace(
        layer_id=layer_id,
        conv_weights=w.conv,
        bias=None,
        activation="silu",
        A_log=w.A_log,
        dt_bias=w.dt_bias,
        head_q_dim=d,
        head_k_dim=d,
        head_v_dim=d,
        num_q_heads=h,
        num_k_heads=h,
        num_v_heads=hv,
        q_dim=h * d,
        k_dim=h * d,
        v_dim=hv * d,
    )


def gdn_backend(state, layer_ids: list[int], numerics: ServerNumerics, slots: int, device: str):
    """GDNAttnBackend on the Triton kernels over ``state`` (a ``MambaPool.SpeculativeState``).

    Batch row ``i`` owns verify scratch row ``i`` (``build_verify_intermediate_state_indices``).
    """
    from sglang.srt.layers.attention.linear.gdn_backend import (
        GDNAttnBackend,
        GDNKernelDispatcher,
    )
    from sglang.srt.layers.attention.linear.utils import LinearAttnKernelBackend

    mamba_map = {layer_id: i for i, layer_id in enumerate(layer_ids)}
    triton = LinearAttnKernelBackend.TRITON
    gdn = GDNAttnBackend.__new__(GDNAttnBackend)
    gdn.kernel_dispatcher = GDNKernelDispatcher(triton, triton, triton)
    gdn.verify_exact_parity = numerics.exact_parity
    gdn.state_trace = None
    gdn.mis_metadata = None
    gdn._use_strided_target_verify_qkv = True
    gdn.verify_intermediate_state_indices = torch.arange(
        slots + 1, dtype=torch.int32, device=device
    )
    gdn.req_to_token_pool = SimpleNamespace(
        size=slots,
        mamba_pool=SimpleNamespace(),
        mamba_map=mamba_map,
        mamba2_layer_cache=lambda layer_id: state.at_layer_idx(mamba_map[layer_id]),
        get_speculative_mamba2_params_all_layers=lambda: state,
        short_conv_pool=SimpleNamespace(conv_state=None, intermediate_conv_state=None),
        ngram_pool=SimpleNamespace(context=None, intermediate_context=None),
    )
    gdn.accept_lens_pool = None
    return gdn


def speculative_state(
    c: ModelConfig, slots: int, draft_tokens: int, ssm_dtype, conv_dtype, device: str
):
    """``MambaPool.SpeculativeState``: persistent conv/SSM pools and the verify scratch."""
    from sglang.srt.mem_cache.memory_pool import MambaPool

    layers, hv, d = len(c.gdn_layers), c.gdn_v_heads, c.gdn_head_dim
    window = (c.qkv_dim, c.conv_width - 1)
    steps = max(draft_tokens, 1)
    return MambaPool.SpeculativeState(
        conv=[torch.zeros(layers, slots + 1, *window, dtype=conv_dtype, device=device)],
        temporal=torch.zeros(layers, slots + 1, hv, d, d, dtype=ssm_dtype, device=device),
        intermediate_ssm=torch.zeros(
            layers, slots + 1, steps, hv, d, d, dtype=ssm_dtype, device=device
        ),
        intermediate_conv_window=[
            torch.zeros(layers, slots + 1, steps, *window, dtype=conv_dtype, device=device)
        ],
    )


def forward_batch(
    phase: str,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    out_cache_loc: torch.Tensor,
    width: int,
    **fields,
) -> SimpleNamespace:
    """What the Triton and GDN backends read of a decode or TARGET_VERIFY ForwardBatch.

    ``width`` tokens per request (1 in decode, gamma + 1 in verify); ``seq_lens``
    count decode's own token, and in verify are the committed lengths (drafts
    excluded). ``fields``: what else a caller's forward reads (positions, input_ids,
    rids for the state trace).
    """
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    if phase not in ("decode", "verify"):
        raise ValueError(f"phase must be decode or verify, not {phase!r}")
    verify = phase == "verify"
    return SimpleNamespace(
        forward_mode=ForwardMode.TARGET_VERIFY if verify else ForwardMode.DECODE,
        batch_size=len(seq_lens),
        req_pool_indices=req_pool_indices,
        seq_lens=seq_lens,
        seq_lens_cpu=seq_lens.cpu(),
        seq_lens_sum=int(seq_lens.sum()),
        out_cache_loc=out_cache_loc,
        out_cache_loc_is_physical=False,  # ForwardBatch's default
        kv_loc_plan=None,
        encoder_lens=None,
        mamba_track_mask=None,
        extend_seq_lens=None,
        extend_start_loc=None,
        extend_prefix_lens=None,
        extend_seq_lens_cpu=None,
        mha_one_shot=False,
        attn_attend_prefix_cache=False,
        spec_info=(
            SimpleNamespace(custom_mask=None, num_tokens_per_req=width, draft_token_num=width)
            if verify
            else None
        ),
        **fields,
    )
