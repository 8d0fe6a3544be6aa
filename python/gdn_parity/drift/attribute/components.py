"""The components whose outputs the attribution records, and the kind of source each one is.

A forward records, for every row of the tracked request, the output of each
component in the order the model computes it; after a decode step or a verify
commit it also records the request's persistent GDN state. No torch here: the
CLI and the report read these names without importing the model.
"""

from __future__ import annotations

from enum import StrEnum


class Kind(StrEnum):
    """The sources of difference the issue names, plus the norms between them."""

    GEMM = "gemm"
    NORM = "norm"
    ATTENTION = "attention"
    CONV = "conv"
    GDN = "gdn"


COMPONENTS: dict[str, Kind] = {
    # every layer
    "input_norm": Kind.NORM,
    # GDN layers
    "in_proj_qkvz": Kind.GEMM,
    "in_proj_ba": Kind.GEMM,
    "conv": Kind.CONV,  # the conv1d's output (silu applied), the recurrence's q/k/v
    "gdn": Kind.GDN,  # the recurrence's output, before the gated norm
    "gated_norm": Kind.NORM,
    "out_proj": Kind.GEMM,
    # full-attention layers
    "qkv_proj": Kind.GEMM,
    "q_norm_rope": Kind.NORM,  # q after its RMSNorm and rotary
    "k_norm_rope": Kind.NORM,  # k after its RMSNorm and rotary, as written to the KV cache
    "attention": Kind.ATTENTION,  # the attention output, before o_proj
    "o_proj": Kind.GEMM,
    # every layer
    "post_norm": Kind.NORM,
    "mlp_gate_up": Kind.GEMM,
    "mlp_down": Kind.GEMM,
    # after the last layer
    "final_norm": Kind.NORM,
    "lm_head": Kind.GEMM,
    # the committed state of a GDN layer after a decode step or a verify commit
    "ssm_state": Kind.GDN,
    "conv_state": Kind.CONV,
}

# The components of no layer: the model's layer count stands in for their layer.
FINAL = ("final_norm", "lm_head")
STATES = ("ssm_state", "conv_state")
