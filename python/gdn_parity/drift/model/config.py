"""The drift harness's model: a hybrid GDN model of embedded sizes with seeded random weights.

Every fourth layer is full attention and the others are Gated-DeltaNet, as in
Qwen3.5. GDN layers have GQA heads (``gdn_k_heads`` q/k heads shared by
``gdn_v_heads`` v heads), a width-4 causal conv1d and a gated RMSNorm; every
layer has a SwiGLU MLP. The vocabulary is Qwen3.5's, so the request of
sglang#35150 (input ids up to 248069) can be fed as it is.

``27b`` is Qwen3.5-27B's geometry (and Qwen3.6/3.8-27B's): 64 layers, hidden 5120,
MLP 17408, attention with 24 heads of 256, 4 KV heads, the sigmoid output gate and
rotary on a quarter of each head (rope theta 1e7), GDN with 16 q/k heads and 48 v heads
of 128, vocabulary 248320 (the model's config.json, as in THUDM/slime's
``scripts/models/qwen3.5-27B.sh``; sglang's ``qwen3_5.py`` reads ``attn_output_gate`` and
``partial_rotary_factor``). ``27b-8l`` has the same layers, 8 of them (6 GDN, 2 attention):
for token-identity runs, where the per-layer shapes matter and the depth does not. They are
GPU sizes (``gpu_only``): refused on CPU, and their weights drawn on the device, as 27B
parameters drawn on a CPU would take minutes and twice the weights' size in host memory.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

QWEN35_VOCAB = 248320
# Qwen3.5-27B's context length: ``text_config.max_position_embeddings`` of its config.json
# (huggingface.co/Qwen/Qwen3.5-27B; xorbitsai/inference's qwen3.5 page gives the same
# "Context Length: 262144"). The harness's sizes share its rotary, so they share the limit.
QWEN35_MAX_POSITIONS = 262144


@dataclass(frozen=True)
class ModelConfig:
    name: str
    hidden: int
    layers: int
    intermediate: int
    gdn_k_heads: int
    gdn_v_heads: int
    gdn_head_dim: int  # K = V
    attn_heads: int
    attn_kv_heads: int
    attn_head_dim: int
    conv_width: int = 4
    full_attention_interval: int = 4
    vocab: int = QWEN35_VOCAB
    max_positions: int = QWEN35_MAX_POSITIONS  # the longest request: prompt and output
    rms_eps: float = 1e-6
    rope_theta: float = 10_000.0
    seed: int = 0
    attn_output_gate: bool = False  # q_proj also yields a per-head gate: out * sigmoid(gate)
    partial_rotary_factor: float = 1.0  # rotary on the first head_dim * factor dims
    # Too large for the CPU (the interpreter, the host's memory): the CLI refuses it there,
    # and its weights are drawn with the device's generator.
    gpu_only: bool = False

    def is_gdn(self, layer: int) -> bool:
        return (layer + 1) % self.full_attention_interval != 0

    @property
    def gdn_layers(self) -> list[int]:
        return [i for i in range(self.layers) if self.is_gdn(i)]

    @property
    def attention_layers(self) -> list[int]:
        return [i for i in range(self.layers) if not self.is_gdn(i)]

    @property
    def qkv_dim(self) -> int:
        """The packed q/k/v row of a GDN layer (the conv1d's channels)."""
        return (2 * self.gdn_k_heads + self.gdn_v_heads) * self.gdn_head_dim

    @property
    def gdn_v_dim(self) -> int:
        return self.gdn_v_heads * self.gdn_head_dim

    @property
    def attn_q_dim(self) -> int:
        """The query rows of q_proj (with the output gate: query and gate per head)."""
        return self.attn_heads * self.attn_head_dim * (2 if self.attn_output_gate else 1)

    @property
    def rotary_dim(self) -> int:
        return int(self.attn_head_dim * self.partial_rotary_factor)

    def parameters(self) -> int:
        """Weights of the model: what one copy takes, in elements."""
        h = self.hidden
        kv = self.attn_kv_heads * self.attn_head_dim
        gdn = (self.qkv_dim + self.gdn_v_dim + 2 * self.gdn_v_heads) * h
        gdn += self.qkv_dim * self.conv_width + self.gdn_v_dim * h + self.gdn_head_dim
        gdn += 2 * self.gdn_v_heads  # A_log, dt_bias
        attention = (self.attn_q_dim + 2 * kv) * h + self.attn_heads * self.attn_head_dim * h
        attention += 2 * self.attn_head_dim
        mlp = 3 * self.intermediate * h + 2 * h
        mixers = len(self.gdn_layers) * gdn + len(self.attention_layers) * attention
        return mixers + self.layers * mlp + 2 * self.vocab * h + h


SIZES = {
    # CPU under the Triton interpreter: every kernel call costs milliseconds.
    "tiny": ModelConfig(
        name="tiny",
        hidden=64,
        layers=4,
        intermediate=128,
        gdn_k_heads=1,
        gdn_v_heads=2,
        gdn_head_dim=16,
        attn_heads=4,
        attn_kv_heads=2,
        attn_head_dim=16,
    ),
    # GPU: Qwen3.5's head geometry (K = V = 128, GQA GDN heads) at 1/5 the width.
    "large": ModelConfig(
        name="large",
        hidden=1024,
        layers=16,
        intermediate=3072,
        gdn_k_heads=4,
        gdn_v_heads=8,
        gdn_head_dim=128,
        attn_heads=8,
        attn_kv_heads=2,
        attn_head_dim=128,
    ),
}
_QWEN35_27B = ModelConfig(
    name="27b",
    hidden=5120,
    layers=64,
    intermediate=17408,
    gdn_k_heads=16,
    gdn_v_heads=48,
    gdn_head_dim=128,
    attn_heads=24,
    attn_kv_heads=4,
    attn_head_dim=256,
    rope_theta=10_000_000.0,
    attn_output_gate=True,
    partial_rotary_factor=0.25,
    gpu_only=True,
)
SIZES["27b"] = _QWEN35_27B
SIZES["27b-8l"] = dataclasses.replace(_QWEN35_27B, name="27b-8l", layers=8)
