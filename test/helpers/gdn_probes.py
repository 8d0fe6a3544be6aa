"""Read the gate values g and beta out of a GDN kernel through its stored state.

With the q/k l2norm off and an fp32 state, one recurrence step
``h = h * exp(g); v -= h @ k; v *= beta; h += v k^T`` stores:

* ``exp(g)`` everywhere, when the initial state is all ones and k = 0;
* ``beta`` in column 0, when the initial state is 0, k = e_0 and v = 1.

Both are exact: no other rounding touches the value. So two kernels that store
equal states for these inputs computed equal gates.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class GateInputs:
    a: torch.Tensor  # [N, HV]
    b: torch.Tensor  # [N, HV]
    A_log: torch.Tensor  # [HV] fp32
    dt_bias: torch.Tensor  # [HV] fp32
    H: int
    K: int
    V: int

    @property
    def N(self) -> int:
        return self.a.shape[0]

    @property
    def HV(self) -> int:
        return self.a.shape[1]


def random_gate_inputs(
    dtype: torch.dtype, seed: int, N: int = 4, H: int = 2, HV: int = 4, K: int = 16, V: int = 16
) -> GateInputs:
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(N, HV, generator=gen) * 3
    a[0, 0] = 25.0  # above the softplus threshold
    a[-1, -1] = -30.0
    b = torch.randn(N, HV, generator=gen) * 2
    b[0, 1] = -0.5  # sigmoid(-0.5) rounds in bf16
    A_log = torch.randn(HV, generator=gen)
    dt_bias = torch.randn(HV, generator=gen)
    return GateInputs(a.to(dtype), b.to(dtype), A_log, dt_bias, H, K, V)


def probe_rows(inputs: GateInputs, probe: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q, k, v)`` rows packed as ``mixed_qkv`` and the initial states for one probe."""
    n, h, hv, k_dim, v_dim = inputs.N, inputs.H, inputs.HV, inputs.K, inputs.V
    q = torch.ones(n, h * k_dim)
    k = torch.zeros(n, h, k_dim)
    v = torch.ones(n, hv * v_dim)
    if probe == "g":
        state = torch.ones(n, hv, v_dim, k_dim)
    elif probe == "beta":
        k[:, :, 0] = 1.0
        state = torch.zeros(n, hv, v_dim, k_dim)
    else:
        raise ValueError(probe)
    mixed = torch.cat([q, k.reshape(n, h * k_dim), v], dim=-1).to(inputs.a.dtype)
    return mixed, state


def read_probe(state: torch.Tensor, probe: str) -> torch.Tensor:
    """``[N, HV]`` gate values from stored states ``[N, HV, V, K]``."""
    if probe == "g":
        values = state[..., 0, 0]
        assert torch.equal(state, values[..., None, None].expand_as(state))
    else:
        values = state[..., 0, 0]
        assert torch.equal(state[..., 0], values[..., None].expand_as(state[..., 0]))
        assert not state[..., 1:].any()
    return values
