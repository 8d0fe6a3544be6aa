"""The ``config.json`` of the target and of its DSpark draft, for a harness size.

The target is a text-only Qwen3.5 checkpoint, as sglang 0.5.23 loads it: ``Qwen3_5ForCausalLM``
(``srt/models/qwen3_5_text.py``, body ``srt/models/qwen3_5.py``), its config parsed by
sglang's ``Qwen3_5TextConfig`` (``srt/configs/qwen3_5.py``). Every geometry number is the
harness's ``ModelConfig`` (``drift/model/config.py`` cites the 27B's), the context length
too. What the harness has no field for is Qwen3.5-27B's own (its ``config.json``,
``text_config``): the token ids and ``mamba_ssm_dtype`` (float32, sglang's default too;
``--mamba-ssm-dtype`` overrides it). ``rope_parameters`` holds no ``mrope_section``: the text
model then runs 1-D RoPE. ``attn_output_gate`` is written for every size, because sglang
defaults it to true.

The draft is a ``Qwen3DSparkModel`` (``srt/models/dspark.py``), read as a ``qwen3`` config by
sglang's DFlash/DSpark parsers (``speculative/dflash_utils.py``,
``speculative/dspark_components/dspark_config.py``). Its weights are never written: the server
loads it with ``--speculative-draft-load-format dummy``. So its numbers set the draft's cost,
not its quality:

- ``hidden_size`` is the target's (the draft reads the target's hidden states and shares its
  embedding and LM head);
- each layer has the target's attention geometry and MLP width, with full rotary;
- ``DRAFT_LAYERS`` (5) layers, as the Qwen3-8B DSpark draft in vllm-project/speculators'
  converter tests (5 layers, target layers 1, 9, 17, 25, 33 of 36, ``markov_rank`` 256,
  ``vanilla``); fewer on a target too shallow for 5 distinct capture layers;
- ``target_layer_ids`` are spread from the second layer to the third from last, one per draft
  layer, as DFlash picks them when a draft names none (the middle layer for a one-layer draft);
- ``block_size`` is γ; the server's ``--speculative-dspark-block-size`` overrides it (a
  ``--speculative-num-draft-tokens`` other than ``block_size`` + 1 is refused at start-up);
- ``mask_token_id`` is the vocabulary's last row, which no tokenizer id reaches;
- ``markov_rank`` 256 with a ``vanilla`` head (that draft's);
- no confidence head (``enable_confidence_head`` false): sglang builds one only outside
  ``SGLANG_RAGGED_VERIFY_MODE=static``, its default and the contract's mode, and there a dummy
  head would pick each request's verify length.
"""

from __future__ import annotations

from typing import Any

from gdn_parity.drift.model.config import ModelConfig

# Qwen3.5-27B's config.json (text_config), for what the harness's ModelConfig does not hold.
QWEN35_EOS_TOKEN_ID = 248044
QWEN35_SSM_DTYPE = "float32"

DRAFT_LAYERS = 5
DRAFT_MARKOV_RANK = 256
DRAFT_MARKOV_HEAD = "vanilla"
# A DSpark/DFlash block longer than 16 (sglang's DFlash default block size, and the published
# drafts') has no draft to match; the verify keeps gamma + 1 GDN states per request.
MAX_GAMMA = 16


def _rope(c: ModelConfig) -> dict[str, Any]:
    return {
        "rope_type": "default",
        "rope_theta": c.rope_theta,
        "partial_rotary_factor": c.partial_rotary_factor,
    }


def target_config(c: ModelConfig) -> dict[str, Any]:
    """The target's ``config.json``: ``c`` as a text-only Qwen3.5 model."""
    return {
        "architectures": ["Qwen3_5ForCausalLM"],
        "model_type": "qwen3_5_text",
        "dtype": "bfloat16",
        "vocab_size": c.vocab,
        "hidden_size": c.hidden,
        "intermediate_size": c.intermediate,
        "num_hidden_layers": c.layers,
        "hidden_act": "silu",
        "rms_norm_eps": c.rms_eps,
        "tie_word_embeddings": False,
        "max_position_embeddings": c.max_positions,
        "full_attention_interval": c.full_attention_interval,
        "layer_types": [
            "linear_attention" if c.is_gdn(layer) else "full_attention" for layer in range(c.layers)
        ],
        "num_attention_heads": c.attn_heads,
        "num_key_value_heads": c.attn_kv_heads,
        "head_dim": c.attn_head_dim,
        "attention_bias": False,
        "attn_output_gate": c.attn_output_gate,
        "partial_rotary_factor": c.partial_rotary_factor,
        "rope_parameters": _rope(c),
        "linear_num_key_heads": c.gdn_k_heads,
        "linear_num_value_heads": c.gdn_v_heads,
        "linear_key_head_dim": c.gdn_head_dim,
        "linear_value_head_dim": c.gdn_head_dim,
        "linear_conv_kernel_dim": c.conv_width,
        "mamba_ssm_dtype": QWEN35_SSM_DTYPE,
        "bos_token_id": None,
        "eos_token_id": QWEN35_EOS_TOKEN_ID,
        "pad_token_id": None,
    }


def draft_layers(c: ModelConfig) -> int:
    """The draft's depth: ``DRAFT_LAYERS``, or fewer where the target has fewer than that many
    layers from its second to its third from last (each draft layer reads its own)."""
    return max(1, min(DRAFT_LAYERS, c.layers - 3))


def target_layer_ids(c: ModelConfig) -> list[int]:
    """The target layers whose outputs the draft reads: ``draft_layers(c)`` of them, evenly
    spread from layer 1 to layer ``c.layers - 3``; the middle layer for one."""
    n = draft_layers(c)
    if n == 1:
        return [c.layers // 2]
    first, last = 1, c.layers - 3
    return [round(first + i * (last - first) / (n - 1)) for i in range(n)]


def draft_config(c: ModelConfig, gamma: int) -> dict[str, Any]:
    """The DSpark draft's ``config.json`` for target ``c``, drafting ``gamma`` tokens a step."""
    layers = draft_layers(c)
    return {
        "architectures": ["Qwen3DSparkModel"],
        "model_type": "qwen3",
        "dtype": "bfloat16",
        "vocab_size": c.vocab,
        "hidden_size": c.hidden,
        "intermediate_size": c.intermediate,
        "num_hidden_layers": layers,
        "hidden_act": "silu",
        "rms_norm_eps": c.rms_eps,
        "tie_word_embeddings": False,
        "max_position_embeddings": c.max_positions,
        "num_attention_heads": c.attn_heads,
        "num_key_value_heads": c.attn_kv_heads,
        "head_dim": c.attn_head_dim,
        "attention_bias": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": c.rope_theta},
        "block_size": gamma,
        "num_target_layers": c.layers,
        "dflash_config": {
            "mask_token_id": c.vocab - 1,
            "target_layer_ids": target_layer_ids(c),
        },
        "markov_rank": DRAFT_MARKOV_RANK,
        "markov_head_type": DRAFT_MARKOV_HEAD,
        "enable_confidence_head": False,
    }
