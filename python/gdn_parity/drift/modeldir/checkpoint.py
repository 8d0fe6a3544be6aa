"""The harness's weights under the names and conventions of a text-only Qwen3.5 checkpoint.

The names are those of a Hugging Face ``Qwen3_5ForCausalLM`` state dict (``model.layers.N.
linear_attn.in_proj_qkv.weight``, ``model.layers.N.self_attn.q_proj.weight``, ...), which
sglang's ``load_weights`` (``srt/models/qwen3_5_text.py``, then ``srt/models/qwen3_5.py``)
maps onto its fused parameters: ``in_proj_qkv`` and ``in_proj_z`` into ``in_proj_qkvz``,
``in_proj_b`` and ``in_proj_a`` into ``in_proj_ba``, ``q/k/v_proj`` into ``qkv_proj``,
``gate/up_proj`` into ``gate_up_proj``. Those fused parameters then hold exactly the fused
tensors the harness's server stack multiplies by (``ModelWeights.qkvz``, ``ba``, ``qkv``,
``gate_up``): one model, two loaders.

The conventions that differ from the harness's tensors:

- sglang's ``GemmaRMSNorm`` (the decoder layers' two norms, the final norm, and attention's
  q_norm and k_norm) multiplies by ``1 + weight``, so a checkpoint stores the harness's
  multiplier less one (zeros for its unit norms), as the server stack's ``q_norm - 1`` does;
- the GDN gated norm (fla's ``RMSNormGated``) multiplies by its weight as it is;
- ``conv1d.weight`` is ``[channels, 1, width]``, a Conv1d's shape;
- ``A_log`` stays float32, the rest is the harness's dtype (bfloat16).
"""

from __future__ import annotations

import torch

from gdn_parity.drift.model.weights import AttentionWeights, GDNWeights, ModelWeights
from gdn_parity.drift.modeldir.safetensors_files import Tensors


def _gemma(multiplier: torch.Tensor) -> torch.Tensor:
    """What a ``GemmaRMSNorm`` stores for ``multiplier``: it multiplies by ``1 + weight``."""
    return multiplier - 1


def _gdn(prefix: str, m: GDNWeights) -> Tensors:
    return [
        (f"{prefix}.in_proj_qkv.weight", m.qkv),
        (f"{prefix}.in_proj_z.weight", m.z),
        (f"{prefix}.in_proj_b.weight", m.b),
        (f"{prefix}.in_proj_a.weight", m.a),
        (f"{prefix}.conv1d.weight", m.conv.unsqueeze(1)),
        (f"{prefix}.A_log", m.A_log),
        (f"{prefix}.dt_bias", m.dt_bias),
        (f"{prefix}.norm.weight", m.norm),
        (f"{prefix}.out_proj.weight", m.out),
    ]


def _attention(prefix: str, m: AttentionWeights) -> Tensors:
    return [
        (f"{prefix}.q_proj.weight", m.q),
        (f"{prefix}.k_proj.weight", m.k),
        (f"{prefix}.v_proj.weight", m.v),
        (f"{prefix}.o_proj.weight", m.o),
        (f"{prefix}.q_norm.weight", _gemma(m.q_norm)),
        (f"{prefix}.k_norm.weight", _gemma(m.k_norm)),
    ]


def checkpoint_tensors(w: ModelWeights) -> Tensors:
    """``(name, tensor)`` of every checkpoint tensor, layer by layer, on the weights' device
    (views of ``w`` where the convention keeps the values)."""
    tensors: Tensors = [("model.embed_tokens.weight", w.embed)]
    for i, lw in enumerate(w.layers):
        layer = f"model.layers.{i}"
        if isinstance(lw.mixer, GDNWeights):
            tensors += _gdn(f"{layer}.linear_attn", lw.mixer)
        else:
            tensors += _attention(f"{layer}.self_attn", lw.mixer)
        tensors += [
            (f"{layer}.input_layernorm.weight", _gemma(lw.input_norm)),
            (f"{layer}.post_attention_layernorm.weight", _gemma(lw.post_norm)),
            (f"{layer}.mlp.gate_proj.weight", lw.gate),
            (f"{layer}.mlp.up_proj.weight", lw.up),
            (f"{layer}.mlp.down_proj.weight", lw.down),
        ]
    tensors += [("model.norm.weight", _gemma(w.final_norm)), ("lm_head.weight", w.lm_head)]
    return tensors
