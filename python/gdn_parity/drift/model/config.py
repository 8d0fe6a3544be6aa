"""The drift harness's model: a hybrid GDN model of embedded sizes with seeded random weights.

Every fourth layer is full attention and the others are Gated-DeltaNet, as in
Qwen3.5. GDN layers have GQA heads (``gdn_k_heads`` q/k heads shared by
``gdn_v_heads`` v heads), a width-4 causal conv1d and a gated RMSNorm; every
layer has a SwiGLU MLP. The vocabulary is Qwen3.5's, so the request of
sglang#35150 (input ids up to 248069) can be fed as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

QWEN35_VOCAB = 248320


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
    rms_eps: float = 1e-6
    rope_theta: float = 10_000.0
    seed: int = 0

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
