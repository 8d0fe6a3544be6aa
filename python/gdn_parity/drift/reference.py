"""The reference every verify kernel is held to: sglang's packed decode, one token at a time.

As fla keeps a naive reference beside each kernel, this is the one definition of
"what Base decode computes" that the CPU tests and the GPU scripts compare the
verify kernels with. It imports sglang's kernels from whichever sglang is
importable (a tree made importable by ``gdn_parity.sandbox``).
"""

from __future__ import annotations

from dataclasses import dataclass
from inspect import signature

import torch


@dataclass(frozen=True)
class ConvInputs:
    """The causal conv1d before the recurrence: its state pool and the layer's weights."""

    pool: torch.Tensor  # [slots, dim, W-1], updated in place
    weight: torch.Tensor  # [dim, W]
    bias: torch.Tensor | None
    activation: str


@dataclass(frozen=True)
class DecodeSteps:
    outputs: torch.Tensor  # [N, D, HV, V]
    states: torch.Tensor  # [N, D, HV, V, K]: the SSM state after each step
    windows: torch.Tensor | None  # [N, D, dim, W-1]: the conv state after each step


def decode_token_by_token(
    mixed: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    ssm_pool: torch.Tensor,
    indices: torch.Tensor,
    num_steps: int,
    conv: ConvInputs | None = None,
    exact_parity: bool = True,
) -> DecodeSteps:
    """Base decode of ``num_steps`` tokens of each of ``len(indices)`` requests.

    Rows are request-major (row ``i * num_steps + t`` is request ``i``'s step ``t``),
    as a verify batch lays them out; ``mixed`` is the packed q/k/v (after the conv,
    unless ``conv`` is given). ``ssm_pool`` (and ``conv.pool``) are advanced in
    place: pass copies of the committed state. A padded request (index -1) keeps
    its row of zeros in the outputs; its states are those of slot 0. With
    ``exact_parity`` (the default) decode runs as under --gdn-verify-exact-parity,
    where the tree's decode has that switch.
    """
    from sglang.kernels.ops.attention.fla.fused_recurrent import (
        fused_recurrent_gated_delta_rule_packed_decode,
    )
    from sglang.kernels.ops.mamba.causal_conv1d_triton import causal_conv1d_update

    flag = {}
    if (
        exact_parity
        and "exact_parity" in signature(fused_recurrent_gated_delta_rule_packed_decode).parameters
    ):
        flag = {"exact_parity": True}
    n = indices.shape[0]
    hv, v, k = ssm_pool.shape[-3:]
    slots = indices.clamp(min=0).long()
    outputs, states, windows = [], [], []
    for t in range(num_steps):
        rows = torch.arange(n, device=mixed.device) * num_steps + t
        x = mixed[rows].contiguous()
        if conv is not None:
            x = causal_conv1d_update(
                x, conv.pool, conv.weight, conv.bias, conv.activation, conv_state_indices=indices
            )
            windows.append(conv.pool[slots].clone())
        out = torch.empty(n, 1, hv, v, dtype=mixed.dtype, device=mixed.device)
        fused_recurrent_gated_delta_rule_packed_decode(
            x, a[rows].contiguous(), b[rows].contiguous(), A_log, dt_bias, k**-0.5,
            ssm_pool, out, indices, use_qk_l2norm_in_kernel=True, **flag,
        )  # fmt: skip
        outputs.append(out.view(n, hv, v))
        states.append(ssm_pool[slots].clone())
    return DecodeSteps(
        torch.stack(outputs, 1),
        torch.stack(states, 1),
        torch.stack(windows, 1) if conv is not None else None,
    )
