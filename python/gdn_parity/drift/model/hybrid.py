"""The hybrid model serving one request: prefill, Base decode, TARGET_VERIFY and commit.

Embedding, norms, projections, attention, MLP and lm_head run one row at a time
in plain torch (``rowwise``); the GDN recurrence of all rows of a forward runs
in one call of sglang's kernels (``gdn``), as in the server.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from gdn_parity.drift.model import rowwise
from gdn_parity.drift.model.attention import AttentionLayer, KVCache, load_triton_attention
from gdn_parity.drift.model.commit import commit_verify
from gdn_parity.drift.model.config import SIZES, ModelConfig
from gdn_parity.drift.model.gdn import GDNLayer, GDNPools, TraceStep
from gdn_parity.drift.model.kernels import SglangKernels, load_kernels
from gdn_parity.drift.model.weights import DTYPE, ModelWeights, make_weights

if TYPE_CHECKING:
    from gdn_parity.drift.attribute.recorder import ComponentRecorder

PHASES = ("prefill", "decode", "verify")
ATTENTION = ("torch", "sglang-triton")


@dataclass
class Snapshot:
    """The request's full state: GDN pools (persistent part) and KV cache."""

    gdn: tuple[torch.Tensor, torch.Tensor]
    keys: torch.Tensor
    values: torch.Tensor


class HybridModel:
    def __init__(
        self,
        config: ModelConfig,
        weights: ModelWeights,
        kernels: SglangKernels,
        *,
        device: str,
        max_len: int,
        ssm_dtype: torch.dtype = torch.bfloat16,
        conv_dtype: torch.dtype = torch.bfloat16,
        rid: str = "req-0",
        attention: str = "torch",
        exact_parity: bool = False,
    ):
        self.c = config
        self.w = weights
        self.kernels = kernels
        self.device = device
        self.ssm_dtype, self.conv_dtype = ssm_dtype, conv_dtype
        self.rid = rid
        self.max_len = max_len
        self.slot = 1  # the request's pool slot; slot 0 stays zero
        self.slots = torch.tensor([self.slot], dtype=torch.int32, device=device)
        self.pools = GDNPools(config, 1, ssm_dtype, conv_dtype, device)
        self.cache = KVCache(config, max_len, weights.embed.dtype, device)
        self.lm_head = weights.lm_head.float()
        if attention not in ATTENTION:
            raise ValueError(f"attention must be one of {ATTENTION}")
        triton = load_triton_attention() if attention == "sglang-triton" else None
        self.mixers: list[GDNLayer | AttentionLayer] = []
        gdn_index = attn_index = 0
        for layer, lw in enumerate(weights.layers):
            if config.is_gdn(layer):
                self.mixers.append(GDNLayer(layer, gdn_index, lw.mixer, config, kernels))
                gdn_index += 1
            else:
                self.mixers.append(
                    AttentionLayer(attn_index, lw.mixer, config, triton, layer_id=layer)
                )
                attn_index += 1
        # The run's --gdn-verify-exact-parity: the loops pass it per call; kept for live_sources.
        self.exact_parity = exact_parity
        self.trace: Any = None  # a GDNStateTrace while a traced run is in progress
        self.probe: ComponentRecorder | None = None

    @classmethod
    def build(
        cls,
        size: str,
        device: str,
        *,
        max_len: int,
        ssm_dtype: str = "bfloat16",
        dtype: torch.dtype = DTYPE,
        rid: str = "req-0",
        attention: str = "torch",
        exact_parity: bool = False,
    ) -> HybridModel:
        """The harness model of ``size`` (``SIZES``), its seeded weights in ``dtype``, the
        importable kernels."""
        config = SIZES[size]
        return cls(
            config,
            make_weights(config, device, dtype),
            load_kernels(),
            device=device,
            max_len=max_len,
            ssm_dtype=getattr(torch, ssm_dtype),
            rid=rid,
            attention=attention,
            exact_parity=exact_parity,
        )

    def start_trace(self, path: str, name: str, flags: dict) -> None:
        """Record the GDN states of the next runs with sglang's GDNStateTrace, to ``path``."""
        self.trace = self.kernels.open_trace(path, name, self.ssm_dtype, self.conv_dtype, flags)

    def stop_trace(self) -> None:
        if self.trace is not None:
            self.trace.close()
            self.trace = None

    def set_draft_tokens(self, draft_tokens: int) -> None:
        """Size the verify scratch for ``draft_tokens`` rows, keeping the persistent state."""
        state = self.pools.state(self.slot)
        self.pools = GDNPools(self.c, draft_tokens, self.ssm_dtype, self.conv_dtype, self.device)
        self.pools.load(self.slot, state)

    def clear(self) -> None:
        """A fresh request: zero state, as sglang zeroes a newly allocated mamba slot."""
        self.pools.load(self.slot, tuple(torch.zeros_like(t) for t in self.pools.state(self.slot)))
        self.cache.keys.zero_()
        self.cache.values.zero_()

    def snapshot(self) -> Snapshot:
        return Snapshot(
            self.pools.state(self.slot), self.cache.keys.clone(), self.cache.values.clone()
        )

    def restore(self, snapshot: Snapshot) -> None:
        self.pools.load(self.slot, snapshot.gdn)
        self.cache.keys.copy_(snapshot.keys)
        self.cache.values.copy_(snapshot.values)

    def gdn_state(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The request's persistent SSM and conv state, ``[gdn layers, ...]`` copies."""
        return self.pools.state(self.slot)

    def live_sources(self) -> list[str]:
        """The sources of decode/verify difference this stack leaves to differ.

        GEMMs, norms and the conv run the same way for a verify row as for a decode
        step here; attention does too unless it is sglang's Triton kernels; the GDN
        verify does under --gdn-verify-exact-parity.
        """
        attention = ["attention"] if self.mixers[-1].triton is not None else []
        return attention + ([] if self.exact_parity else ["gdn"])

    def attach_probe(self, probe: ComponentRecorder | None) -> None:
        """Record every row's component outputs into ``probe`` (None: stop recording).

        The in_proj, qkv_proj and mlp_gate_up taps are concatenations of the
        separate row GEMMs (copies); every other tap is the tensor the forward reads on.
        """
        self.probe = probe
        for mixer in self.mixers:
            mixer.probe = probe

    @property
    def _recording(self) -> bool:
        return self.probe is not None and self.probe.active

    def _tap(self, layer: int, component: str, rows) -> None:
        if self._recording:
            self.probe.tap(layer, component, rows)

    def forward(
        self, tokens: list[int], start: int, phase: str, exact_parity: bool = False
    ) -> torch.Tensor:
        """Logits ``[len(tokens), vocab]`` (fp32) of ``tokens`` at positions ``start...``."""
        assert phase in PHASES, phase
        c, device = self.c, self.device
        positions = list(range(start, start + len(tokens)))
        ids = torch.tensor(tokens, device=device)
        trace = None
        if self.trace is not None and phase != "prefill":
            batch = SimpleNamespace(
                rids=[self.rid],
                positions=torch.tensor(positions, device=device),
                input_ids=ids,
            )
            trace = TraceStep(self.trace, batch)
        if self.probe is not None:
            self.probe.begin(phase, start, len(tokens))
        rows = [self.w.embed[ids[i : i + 1]] for i in range(len(tokens))]
        for layer, (mixer, lw) in enumerate(zip(self.mixers, self.w.layers, strict=True)):
            normed = [rowwise.rms_norm(r, lw.input_norm, c.rms_eps) for r in rows]
            self._tap(layer, "input_norm", normed)
            if isinstance(mixer, AttentionLayer):
                outs = mixer.forward_rows(normed, start, phase, self.cache)
            else:
                outs = self._gdn_rows(mixer, normed, phase, exact_parity, trace)
            rows = [r + o for r, o in zip(rows, outs, strict=True)]
            normed = [rowwise.rms_norm(r, lw.post_norm, c.rms_eps) for r in rows]
            self._tap(layer, "post_norm", normed)
            rows = [r + d for r, d in zip(rows, self._mlp_rows(layer, lw, normed), strict=True)]
        normed = [rowwise.rms_norm(r, self.w.final_norm, c.rms_eps) for r in rows]
        self._tap(c.layers, "final_norm", normed)
        logits = [F.linear(x.float(), self.lm_head) for x in normed]
        self._tap(c.layers, "lm_head", logits)
        return torch.cat(logits)

    def _mlp_rows(self, layer: int, lw, normed: list[torch.Tensor]) -> list[torch.Tensor]:
        """SwiGLU, one row at a time."""
        gates = [F.linear(x, lw.gate) for x in normed]
        ups = [F.linear(x, lw.up) for x in normed]
        if self._recording:
            pairs = zip(gates, ups, strict=True)
            self._tap(layer, "mlp_gate_up", [torch.cat(gu, -1) for gu in pairs])
        down = [F.linear(F.silu(g) * u, lw.down) for g, u in zip(gates, ups, strict=True)]
        self._tap(layer, "mlp_down", down)
        return down

    def _gdn_rows(self, layer: GDNLayer, normed, phase, exact_parity, trace) -> list[torch.Tensor]:
        w, c = layer.w, self.c
        mixed = torch.cat([F.linear(x, w.qkv) for x in normed])
        z = [F.linear(x, w.z).view(c.gdn_v_heads, c.gdn_head_dim) for x in normed]
        b = torch.cat([F.linear(x, w.b) for x in normed])
        a = torch.cat([F.linear(x, w.a) for x in normed])
        if self._recording:
            z_rows = torch.stack(z).view(len(normed), -1)
            self._tap(layer.layer_id, "in_proj_qkvz", torch.cat([mixed, z_rows], -1))
            self._tap(layer.layer_id, "in_proj_ba", torch.cat([b, a], -1))
        if phase == "prefill":
            core = layer.prefill(self.pools, self.slots, mixed, a, b)
        elif phase == "decode":
            core = layer.decode(self.pools, self.slots, mixed, a, b, exact_parity, trace)
        else:
            core = layer.verify(self.pools, self.slots, mixed, a, b, exact_parity, trace)
        self._tap(layer.layer_id, "gdn", core)
        normed = [
            rowwise.gated_rms_norm(core[i], z[i], w.norm, c.rms_eps).view(1, -1)
            for i in range(len(normed))
        ]
        self._tap(layer.layer_id, "gated_norm", normed)
        outs = [F.linear(x, w.out) for x in normed]
        self._tap(layer.layer_id, "out_proj", outs)
        return outs

    def commit(self, step: int) -> None:
        """Commit verify step ``step`` (accepted drafts + 1 - 1) into the persistent pools."""
        steps = torch.tensor([step], dtype=torch.int32, device=self.device)
        commit_verify(self.kernels, self.pools, self.slots, steps)
        if self.trace is not None:
            self.trace.trace_post_commit(
                self.c.gdn_layers, self.pools.temporal, self.pools.conv[0], self.slots, steps
            )
