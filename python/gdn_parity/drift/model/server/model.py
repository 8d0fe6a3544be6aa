"""The hybrid model as sglang's server runs it: a padded batch, one GEMM per linear layer.

``ServerModel`` serves ``requests`` requests at once. Request 0 is the one the
drift loops drive (``forward``/``commit`` take and return its rows, as
``HybridModel`` does); the others are companions with their own prompts and
lengths that ride in every batch: greedy decode in Base, verify rounds that
commit their target's own token (forced reject) in speculative modes. Each
batch is padded to the next CUDA-graph batch size as the graph runner pads it
(``req_pool_indices`` 0, mamba slot -1, ``seq_len`` 1, KV write slot 0): a
Base server's decode list for decode, a speculative server's for verify
(``padding``).

Per forward, each linear layer (GDN in_proj_qkvz/in_proj_ba/out_proj,
attention qkv/o, MLP gate_up/down, lm_head) is one GEMM over every row of the
batch: ``bs`` in decode, ``bs * (gamma + 1)`` in verify. GEMMs are torch's,
or sglang's batch-invariant ops when the variant enables deterministic
inference (CUDA only). Full attention runs ``TritonAttnBackend.forward_decode``
and ``forward_extend`` after ``init_forward_metadata``: the backend picks the
kernel, and writes the K/V of every row (the drafts' too). GDN layers run
``GDNAttnBackend.forward_decode`` (which takes the fused projection-unpack +
conv kernel where ``can_use_fused_qkvzba_causal_conv1d_update_contiguous``
allows it: CUDA) and ``forward_extend`` for verify, after Qwen3.5's own
``fused_qkvzba_split_reshape_cat_contiguous``; the gated norm is fla's
``layernorm_gated.RMSNorm``. With the attention output gate (Qwen3.5's attention:
the 27B sizes) the q/k norms, rotary and the gate split are sglang's
``fused_qk_gemma_rmsnorm_rope_gate``, called as ``forward_prepare_cuda_fused`` calls it
on CUDA, over ``RotaryEmbedding``'s cos/sin cache. Stand-ins, named as such: the
layer RMSNorms are ``rms_norm_batch_invariant`` (Qwen3.5's ``GemmaRMSNorm`` runs
sgl_kernel's ``gemma_rmsnorm``/``gemma_fused_add_rmsnorm`` on CUDA in every mode, and
sgl_kernel does not import here); without the output gate (tiny, large) the q/k norms
are ``rms_norm_batch_invariant`` and rotary the row-wise stack's rope over all rows
(``forward_prepare_native``'s ``RotaryEmbedding`` needs sgl_kernel or vllm); the MLP's
activation is ``SiluAndMul.forward_native`` (sgl_kernel's ``silu_and_mul`` on CUDA).
In sglang's capture mode (``capture_mode``: where ``cost`` warms up and captures) the
streams are Qwen3.5's: in_proj_ba runs on an alt stream beside in_proj_qkvz, and without
the output gate k's norm beside q's; the Triton backend's decode picks Lean as a
server's. The full-attention backend is Triton's (the contract's), where a default
H100/H200 server picks fa3. Prefill (shared by every mode, not compared) runs per
request through the same kernels as the row-wise stack's prefill (the attention's
q/k/gate preparation as in decode), and stores its K/V through the pool's
``set_kv_buffer`` as ``forward_extend`` does; ``prefill_prompts`` (``cost --context``) runs
it in chunks, each an extend over the prefix already in the pool, as sglang's chunked
prefill does.

The KV pool's dtype is sglang's ``--kv-cache-dtype`` (``kv_cache_dtype``: ``auto``, the
model's, or ``fp8_e4m3``), resolved by sglang's own ``configure_kv_cache_dtype``; with
``kv_scale`` the attention layers carry a checkpoint's per-tensor K/V scale
(``backends.attention_layer``), else none, as a model without a quant config.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from gdn_parity.drift.model.commit import commit_verify
from gdn_parity.drift.model.config import ModelConfig
from gdn_parity.drift.model.gdn import GDNLayer
from gdn_parity.drift.model.kernels import SglangKernels
from gdn_parity.drift.model.rowwise import rope
from gdn_parity.drift.model.server import backends
from gdn_parity.drift.model.server.numerics import ServerNumerics, enable_batch_invariant_gemms
from gdn_parity.drift.model.server.padding import padded_batch
from gdn_parity.drift.model.weights import AttentionWeights, ModelWeights

if TYPE_CHECKING:
    from gdn_parity.drift.attribute.recorder import ComponentRecorder

VOCAB_IDS = 248069  # sglang#35150's request uses ids below this
# qwen3_5.py's _forward_input_proj: in_proj_ba overlaps in_proj_qkvz below this many rows
DUAL_STREAM_TOKEN_THRESHOLD = 1024


def companion_prompts(prompt: list[int], requests: int) -> list[list[int]]:
    """Request 0's prompt, then ``requests - 1`` others of different contents and lengths."""
    prompts = [list(prompt)]
    for i in range(1, requests):
        rotated = prompt[i:] + prompt[:i]
        prompts.append([(t + 7919 * i) % VOCAB_IDS for t in rotated[: max(1, len(prompt) - 3 * i)]])
    return prompts


@dataclass
class _Request:
    slot: int  # mamba pool slot; its KV lives in req_to_token row ``slot - 1``
    length: int = 0  # committed tokens (absorbed into the state)
    next_token: int = 0  # its next input: the last emitted token
    targets: list[int] = field(default_factory=list)  # the last verify's argmax rows


@dataclass(frozen=True)
class PreparedStep:
    """One forward of the padded batch, its batch and metadata built: ``run()`` -> logits."""

    run: Callable[[], torch.Tensor]


def _host_copy(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to("cpu", copy=True)


@dataclass
class ServerSnapshot:
    requests: list[tuple[int, int]]
    gdn: tuple[torch.Tensor, torch.Tensor]
    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    rng: Any


class ServerModel:
    """The server-faithful stack; the interface of ``HybridModel`` for request 0."""

    def __init__(
        self,
        config: ModelConfig,
        weights: ModelWeights,
        kernels: SglangKernels,
        numerics: ServerNumerics,
        *,
        device: str,
        max_len: int,
        requests: int,
        ssm_dtype: torch.dtype = torch.bfloat16,
        conv_dtype: torch.dtype = torch.bfloat16,
        kv_cache_dtype: str = "auto",
        kv_scale: float | None = None,
        rid: str = "req-0",
        seed: int = 0,
    ):
        if requests < 1:
            raise ValueError("requests must be at least 1")
        self.c, self.w, self.kernels, self.numerics = config, weights, kernels, numerics
        self.device, self.max_len, self.rid = device, max_len, rid
        self.ssm_dtype, self.conv_dtype = ssm_dtype, conv_dtype
        self.kv_cache_dtype, self.kv_scale = kv_cache_dtype, kv_scale
        self.kv_dtype = backends.kv_cache_dtype(kv_cache_dtype, weights.embed.dtype)
        if kv_scale is not None and self.kv_dtype == weights.embed.dtype:
            raise ValueError("a KV scale needs a quantized KV cache (kv_cache_dtype fp8_e4m3)")
        self.n = requests
        self.padded = {phase: padded_batch(requests, phase) for phase in ("decode", "verify")}
        self.capacity = max(self.padded.values())  # pool slots and req_to_token rows
        gemms = numerics.batch_invariant_gemms
        self.batch_invariant_gemms = gemms and enable_batch_invariant_gemms(device)
        # Qwen3.5's _gdn_decode_fused_proj_conv: decode gets the projections unsplit (CUDA).
        self.fused_decode_proj_conv = numerics.fused_decode_conv and device == "cuda"
        self.requests = [_Request(slot=i + 1) for i in range(requests)]
        self.rng = random.Random(seed)
        self.trace: Any = None
        self.probe: ComponentRecorder | None = None
        self._layer = 0  # the layer being computed, for the conv tap inside the GDN backend
        self._build_layers()
        self._build_pools(draft_tokens=1)

    # -- construction -------------------------------------------------------------------

    def _build_layers(self) -> None:
        from sglang.kernels.ops.attention.fla.layernorm_gated import RMSNorm as RMSNormGated
        from sglang.kernels.ops.attention.fused_qk_rmsnorm_rope_gate import (
            fused_qk_gemma_rmsnorm_rope_gate,
        )
        from sglang.kernels.ops.elementwise.elementwise import fused_sigmoid_mul
        from sglang.srt.batch_invariant_ops import rms_norm_batch_invariant
        from sglang.srt.model_executor.runner_utils import capture_mode

        c, w = self.c, self.w
        self.rms_norm = rms_norm_batch_invariant
        self.sigmoid_mul = fused_sigmoid_mul  # Qwen3.5's attention output gate
        self.qk_norm_rope_gate = fused_qk_gemma_rmsnorm_rope_gate
        self.cos_sin_cache = (
            backends.rotary_cos_sin_cache(c, self.max_len, self.device)
            if c.attn_output_gate
            else None
        )
        # qwen3_5.py's get_stream("alt") on CUDA: what graph capture overlaps on
        self.alt_stream = torch.cuda.Stream() if self.device == "cuda" else None
        # sglang's graph runner's flag, which its capture-time branches read
        self.capture_mode = capture_mode.model_capture_mode
        self.is_capture_mode = capture_mode.get_is_capture_mode
        self.layers: list[SimpleNamespace] = []
        gdn_index = attn_index = 0
        for layer, lw in enumerate(w.layers):
            mlp = lw.gate_up  # MergedColumnParallelLinear: one gate_up GEMM
            if isinstance(lw.mixer, AttentionWeights):
                m = lw.mixer
                self.layers.append(
                    SimpleNamespace(
                        kind="attention",
                        index=layer,
                        radix=backends.attention_layer(attn_index, c, self.kv_scale, self.device),
                        qkv=m.qkv,  # QKVParallelLinear
                        # GemmaRMSNorm's stored weights: the kernel multiplies by weight + 1
                        # (exact for the harness's norm weights, ones)
                        q_norm=m.q_norm - 1,
                        k_norm=m.k_norm - 1,
                        w=m,
                        lw=lw,
                        gate_up=mlp,
                    )
                )
                attn_index += 1
            else:
                m = lw.mixer
                norm = RMSNormGated(c.gdn_head_dim, eps=c.rms_eps, norm_before_gate=True)
                norm = norm.to(device=self.device, dtype=w.embed.dtype)
                norm.weight.data.copy_(m.norm)
                self.layers.append(
                    SimpleNamespace(
                        kind="gdn",
                        index=layer,
                        radix=backends.gdn_layer(layer, c, m),
                        prefill=GDNLayer(layer, gdn_index, m, c, self.kernels),
                        qkvz=m.qkvz,  # Qwen3.5's contiguous in_proj_qkvz
                        ba=m.ba,  # in_proj_ba
                        norm=norm,
                        w=m,
                        lw=lw,
                        gate_up=mlp,
                    )
                )
                gdn_index += 1

    def _build_pools(self, draft_tokens: int) -> None:
        c = self.c
        self.draft_tokens = draft_tokens
        self.state = backends.speculative_state(
            c, self.capacity, draft_tokens, self.ssm_dtype, self.conv_dtype, self.device
        )
        self.gdn = backends.gdn_backend(
            self.state, c.gdn_layers, self.numerics, self.capacity, self.device
        )
        if self.trace is not None:
            self.gdn.state_trace = self.trace
        self.attn = backends.triton_attention_backend(
            c,
            self.numerics,
            kv_slots=self.n * self.max_len + 1,
            req_rows=self.capacity,
            context=self.max_len,
            num_tokens_per_req=draft_tokens,
            dtype=self.kv_dtype,
            device=self.device,
        )
        # Request i's token t lives in KV slot 1 + i * max_len + t; slot 0 takes padded writes.
        slots = torch.arange(self.n * self.max_len, dtype=torch.int32) + 1
        self.kv_slots = slots.view(self.n, self.max_len)  # host copy: _batch reads it per row
        self.attn.req_to_token[: self.n] = self.kv_slots.to(self.device)

    # -- the HybridModel interface ------------------------------------------------------

    def set_draft_tokens(self, draft_tokens: int) -> None:
        snap = self.snapshot()
        # the old pools go before the new ones are made: a 27B's fill most of a GPU
        self.state = self.gdn = self.attn = None
        self._build_pools(draft_tokens)
        self.restore(snap)

    def clear(self) -> None:
        for r in self.requests:
            r.length, r.next_token, r.targets = 0, 0, []
        self.state.temporal.zero_()
        self.state.conv[0].zero_()
        pool = self.attn.token_to_kv_pool
        for buffer in (*pool.k_buffer, *pool.v_buffer):
            buffer.zero_()

    def snapshot(self) -> ServerSnapshot:
        """The requests, GDN states and KV pool (its stored bytes: ``uint8`` for FP8), copied
        to host memory: a 27B's SSM states at batch 64 are 4.6 GiB (bf16) that the GPU,
        holding the weights and the verify scratch, does not have to spare."""
        pool = self.attn.token_to_kv_pool
        return ServerSnapshot(
            [(r.length, r.next_token) for r in self.requests],
            (_host_copy(self.state.temporal), _host_copy(self.state.conv[0])),
            [_host_copy(k) for k in pool.k_buffer],
            [_host_copy(v) for v in pool.v_buffer],
            self.rng.getstate(),
        )

    def restore(self, snap: ServerSnapshot) -> None:
        for r, (length, token) in zip(self.requests, snap.requests, strict=True):
            r.length, r.next_token, r.targets = length, token, []
        self.state.temporal.copy_(snap.gdn[0])
        self.state.conv[0].copy_(snap.gdn[1])
        pool = self.attn.token_to_kv_pool
        for i, (k, v) in enumerate(zip(snap.keys, snap.values, strict=True)):
            pool.k_buffer[i].copy_(k)
            pool.v_buffer[i].copy_(v)
        self.rng.setstate(snap.rng)

    def gdn_state(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Request 0's persistent SSM and conv state, ``[gdn layers, ...]`` copies."""
        slot = self.requests[0].slot
        return self.state.temporal[:, slot].clone(), self.state.conv[0][:, slot].clone()

    def start_trace(self, path: str, name: str, flags: dict) -> None:
        self.trace = self.kernels.open_trace(
            path, f"server stack, {name}", self.ssm_dtype, self.conv_dtype, flags
        )
        self.gdn.state_trace = self.trace

    def stop_trace(self) -> None:
        if self.trace is not None:
            self.trace.close()
            self.trace = None
            self.gdn.state_trace = None

    def live_sources(self) -> list[str]:
        """The sources of decode/verify difference this run computes as a default server does."""
        verify_as_decode = self.attn.verify_as_decode
        live = {
            "gemm": not self.batch_invariant_gemms,
            "attention": not verify_as_decode,
            "conv": self.fused_decode_proj_conv,
            "gdn": not self.numerics.exact_parity,
        }
        return [source for source, on in live.items() if on]

    def attach_probe(self, probe: ComponentRecorder | None) -> None:
        """Record request 0's component outputs into ``probe`` (None: stop recording).

        The conv runs inside ``GDNAttnBackend``: while a probe is attached, the
        backend module's conv functions are wrapped to hand their output to it.
        """
        from sglang.srt.layers.attention.linear import gdn_backend

        self.probe = probe
        for name in ("causal_conv1d_update", "fused_qkvzba_causal_conv1d_update_contiguous"):
            current = getattr(gdn_backend, name, None)  # the fused kernel: CUDA/HIP/XPU only
            if current is None:
                continue
            original = getattr(current, "__wrapped__", current)
            setattr(gdn_backend, name, original if probe is None else self._conv_tap(original))

    def _conv_tap(self, conv):
        @functools.wraps(conv)
        def tapped(*args, **kwargs):
            out = conv(*args, **kwargs)
            mixed = out[0] if isinstance(out, tuple) else out  # the fused kernel: (qkv, z, b, a)
            if self.probe is not None and self.probe.active:
                # decode: [bs, dim]; verify: [bs, dim, draft], request 0's rows are mixed[0].T
                rows = mixed[0].T if mixed.dim() == 3 else mixed[: self.probe.width]
                self.probe.tap(self._layer, "conv", rows)
            return out

        return tapped

    def forward(
        self, tokens: list[int], start: int, phase: str, exact_parity: bool = False
    ) -> torch.Tensor:
        """Request 0's logits ``[len(tokens), vocab]`` (fp32); the companions advance too."""
        if phase == "prefill":
            return self._prefill_all(tokens)
        tracked = self.requests[0]
        if start != tracked.length:
            raise ValueError(f"request 0 is at {tracked.length}, not {start}")
        tracked.next_token = tokens[0]
        if phase == "decode":
            logits = self._step([[r.next_token] for r in self.requests], "decode")
            nexts = logits[1 : self.n, 0].argmax(-1).tolist()
            for r, token in zip(self.requests[1:], nexts, strict=True):
                r.next_token = token
                r.length += 1
            tracked.length += 1
            return logits[0]
        if exact_parity != self.numerics.exact_parity:
            raise ValueError("the server stack's verify kernel is fixed by its numerics")
        width = len(tokens)
        if width != self.draft_tokens:
            raise ValueError(f"verify of {width} rows on a pool sized for {self.draft_tokens}")
        rows = [list(tokens)]
        for r in self.requests[1:]:
            drafts = [self.rng.randrange(self.c.vocab) for _ in range(width - 1)]
            rows.append([r.next_token, *drafts])
        logits = self._step(rows, "verify")
        targets = logits[: self.n].argmax(-1).tolist()
        for r, row in zip(self.requests, targets, strict=True):
            r.targets = row
        return logits[0]

    def commit(self, step: int) -> None:
        """Commit request 0's verify step ``step`` and the companions' step 0."""
        steps = torch.tensor([step] + [0] * (self.n - 1), dtype=torch.int32, device=self.device)
        slots = torch.tensor([r.slot for r in self.requests], dtype=torch.int32, device=self.device)
        commit_verify(self.kernels, self.state, slots, steps)
        if self.trace is not None:
            self.trace.trace_post_commit(
                self.c.gdn_layers, self.state.temporal, self.state.conv[0], slots[:1], steps[:1]
            )
        self.requests[0].length += step + 1
        for r in self.requests[1:]:
            r.length += 1
            r.next_token = r.targets[0]

    # -- forwards -----------------------------------------------------------------------

    def _prefill_all(self, prompt: list[int]) -> torch.Tensor:
        self.clear()
        if self.probe is not None:
            self.probe.begin("prefill", 0, 0)  # shared by every mode: not recorded
        out = None
        for r, p in zip(self.requests, companion_prompts(prompt, self.n), strict=True):
            logits = self._finish(self._prefill(r, p, 0))
            r.length, r.next_token = len(p), int(logits[-1].argmax())
            out = logits if out is None else out
        return out

    def prefill_prompts(self, prompts: list[list[int]], chunk: int) -> torch.Tensor:
        """A fresh state, then request ``i`` prefilled with ``prompts[i]``, one request at a
        time, in forwards of at most ``chunk`` tokens (sglang's ``--chunked-prefill-size``):
        each chunk after the first attends to the KV its request already holds and continues
        its GDN state and conv window. The logits are the last token's alone (sglang's
        ``LogitsProcessor`` prunes an extend to its last tokens): its argmax is the request's
        next token. ``cost --context`` prefills so; the longest forward is ``chunk`` rows.
        Returns each request's last logits, ``[requests, vocab]`` (fp32)."""
        if len(prompts) != self.n:
            raise ValueError(f"{len(prompts)} prompts for {self.n} requests")
        if chunk < 1:
            raise ValueError(f"chunk must be at least 1, not {chunk}")
        self.clear()
        if self.probe is not None:
            self.probe.begin("prefill", 0, 0)
        last = []
        for r, prompt in zip(self.requests, prompts, strict=True):
            if not 0 < len(prompt) < self.max_len:
                raise ValueError(f"a prompt of {len(prompt)} tokens in {self.max_len} KV slots")
            for start in range(0, len(prompt), chunk):
                h = self._prefill(r, prompt[start : start + chunk], start)
            last.append(self._finish(h[-1:])[0])
            r.length, r.next_token = len(prompt), int(last[-1].argmax())
        return torch.stack(last)

    def _linear(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return F.linear(x, weight)

    def _tap(self, layer: int, component: str, out: torch.Tensor) -> None:
        """Hand the probe request 0's rows of ``out`` (rows first; heads may follow as rows)."""
        if self.probe is not None and self.probe.active:
            width = self.probe.width
            self.probe.tap(layer, component, out.reshape(self._rows, -1)[:width])

    def _mlp(self, x: torch.Tensor, layer: SimpleNamespace) -> torch.Tensor:
        gate_up = self._linear(x, layer.gate_up)
        self._tap(layer.index, "mlp_gate_up", gate_up)
        gate, up = gate_up.chunk(2, dim=-1)
        down = self._linear(F.silu(gate) * up, layer.lw.down)  # SiluAndMul.forward_native
        self._tap(layer.index, "mlp_down", down)
        return down

    def _qkv(self, x, layer, positions):
        """q, k, v of the rows, and the output gate ``[rows, heads * head_dim]`` (as
        ``forward_prepare_cuda_fused`` returns it) or None (no output gate)."""
        c = self.c
        qkv = self._linear(x, layer.qkv)
        self._tap(layer.index, "qkv_proj", qkv)
        kv = c.attn_kv_heads * c.attn_head_dim
        q, k, v = qkv.split([c.attn_q_dim, kv, kv], dim=-1)
        if c.attn_output_gate:  # forward_prepare_cuda_fused
            q, k, gate = self.qk_norm_rope_gate(
                q, k, layer.q_norm, layer.k_norm, self.cos_sin_cache, positions, c.rms_eps,
                c.attn_heads, c.attn_kv_heads, c.attn_head_dim, c.rotary_dim, has_gate=True,
            )  # fmt: skip
            self._tap(layer.index, "q_norm_rope", q)
            self._tap(layer.index, "k_norm_rope", k)
            return q, k, v, gate.view(x.shape[0], -1)
        q, k = self._beside(  # forward_prepare_native's _apply_qk_norm
            lambda: self.rms_norm(q.reshape(-1, c.attn_head_dim), layer.w.q_norm, c.rms_eps),
            lambda: self.rms_norm(k.reshape(-1, c.attn_head_dim), layer.w.k_norm, c.rms_eps),
        )
        rows = positions[:, None]  # one position per row, broadcast over its heads
        q = rope(q.view(x.shape[0], -1, c.attn_head_dim), rows, c.rope_theta, c.rotary_dim)
        k = rope(k.view(x.shape[0], -1, c.attn_head_dim), rows, c.rope_theta, c.rotary_dim)
        self._tap(layer.index, "q_norm_rope", q)
        self._tap(layer.index, "k_norm_rope", k)
        return q.reshape(x.shape[0], -1), k.reshape(x.shape[0], -1), v, None

    def _beside(
        self, main: Callable[[], torch.Tensor], side: Callable[[], torch.Tensor], few_rows=True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``main()`` and ``side()``: in capture mode (``capture_mode``) on CUDA with
        ``few_rows``, ``side`` on the alt stream beside ``main``, as Qwen3.5 runs in_proj_ba
        beside in_proj_qkvz and k's norm beside q's."""
        if not (few_rows and self.alt_stream is not None and self.is_capture_mode()):
            return main(), side()
        current = torch.cuda.current_stream()
        self.alt_stream.wait_stream(current)
        first = main()
        with torch.cuda.stream(self.alt_stream):
            second = side()
        current.wait_stream(self.alt_stream)
        return first, second

    def _gated(self, o: torch.Tensor, gate: torch.Tensor | None) -> torch.Tensor:
        """Attention output ``[rows, heads * head_dim]`` times sigmoid of the output gate,
        by sglang's ``fused_sigmoid_mul`` in place, as Qwen3.5's attention, or as it is."""
        return o if gate is None else self.sigmoid_mul(o, gate, inplace=True)

    def _finish(self, h: torch.Tensor) -> torch.Tensor:
        normed = self.rms_norm(h, self.w.final_norm, self.c.rms_eps)
        self._tap(self.c.layers, "final_norm", normed)
        logits = self._linear(normed, self.w.lm_head)  # LogitsProcessor: lm_head in the model dtype
        self._tap(self.c.layers, "lm_head", logits)
        return logits.float()

    def _prefill(self, request: _Request, tokens: list[int], start: int) -> torch.Tensor:
        """The final hidden states (before the norm and lm_head) of ``tokens``, a request's
        prompt from position ``start`` on, its first ``start`` tokens already prefilled:
        sglang's prefill kernels, called as the backends call them for an extend with that
        prefix."""
        c, n = self.c, len(tokens)
        ids = torch.tensor(tokens, device=self.device)
        positions = torch.arange(start, start + n, device=self.device)
        slots = torch.tensor([request.slot], dtype=torch.int32, device=self.device)
        row = self.attn.req_to_token[request.slot - 1, : start + n].long()
        kv_loc = row[start:]
        prefix = torch.tensor([0, start], dtype=torch.int32, device=self.device)
        h = self.w.embed[ids]
        for layer in self.layers:
            x = self.rms_norm(h, layer.lw.input_norm, c.rms_eps)
            if layer.kind == "gdn":
                qkvz, ba = self._linear(x, layer.qkvz), self._linear(x, layer.ba)
                mixed, z = qkvz.split([c.qkv_dim, c.gdn_v_dim], dim=-1)
                b, a = ba.split([c.gdn_v_heads] * 2, dim=-1)
                core = layer.prefill.prefill(
                    self.state, slots, mixed.contiguous(), a, b, continued=start > 0
                )
                out = self._gdn_out(layer, core, z)
            else:
                q, k, v, gate = self._qkv(x, layer, positions)
                radix = layer.radix
                pool, lid = self.attn.token_to_kv_pool, radix.layer_id
                k = k.view(n, c.attn_kv_heads, c.attn_head_dim)
                v = v.view(n, c.attn_kv_heads, c.attn_head_dim)
                self._store_kv(radix, kv_loc, k, v)
                q = q.view(n, c.attn_heads, c.attn_head_dim)
                o = torch.empty_like(q)
                # forward_extend's descales: the layer's scales as floats, else 1.0
                k_descale = 1.0 if radix.k_scale is None else radix.k_scale_float
                v_descale = 1.0 if radix.v_scale is None else radix.v_scale_float
                # the chunk's own K/V as they are, its prefix (kv_indptr [0, start]) from the pool
                self.attn.extend_attention_fwd(
                    q, k, v, o, pool.get_key_buffer(lid), pool.get_value_buffer(lid),
                    torch.tensor([0, n], dtype=torch.int32, device=self.device), prefix,
                    row, None, True, None, n, k_descale, v_descale, sm_scale=radix.scaling,
                )  # fmt: skip
                out = self._linear(self._gated(o.view(n, -1), gate), layer.w.o)
            h = h + out
            h = h + self._mlp(self.rms_norm(h, layer.lw.post_norm, c.rms_eps), layer)
        return h

    def _store_kv(self, radix, loc: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """K/V into the pool as ``TritonAttnBackend.forward_extend`` stores them: the pool's
        ``set_kv_buffer`` (the cast to an FP8 pool's dtype), with the layer's scales on
        copies (``set_kv_buffer`` divides in place) when it has them."""
        pool = self.attn.token_to_kv_pool
        if radix.k_scale is None:
            pool.set_kv_buffer(radix, loc, k, v)
        else:
            pool.set_kv_buffer(radix, loc, k.clone(), v.clone(), radix.k_scale, radix.v_scale)

    def _gdn_out(self, layer, core: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        c = self.c
        rows = z.shape[0]
        self._tap(layer.index, "gdn", core)
        normed = layer.norm(
            core.reshape(-1, c.gdn_head_dim), z.reshape(-1, c.gdn_head_dim).contiguous()
        )
        self._tap(layer.index, "gated_norm", normed)
        out = self._linear(normed.reshape(rows, c.gdn_v_dim), layer.w.out)
        self._tap(layer.index, "out_proj", out)
        return out

    def _batch(self, rows: list[list[int]], phase: str) -> SimpleNamespace:
        """The forward batch of ``rows`` (one list per request), padded to the graph size."""
        bs = self.padded[phase]
        width, pad = len(rows[0]), bs - self.n
        dev = self.device
        lengths = [r.length for r in self.requests]
        ids = [t for row in rows for t in row] + [0] * (pad * width)
        positions = [p + j for p in lengths for j in range(width)] + [0] * (pad * width)
        out_loc = [
            int(self.kv_slots[i, p + j]) for i, p in enumerate(lengths) for j in range(width)
        ] + [0] * (pad * width)
        # Decode counts its own token; verify carries the committed lengths. Padded rows
        # get the Triton backend's CUDA-graph seq_len fill value, 1.
        own = 1 if phase == "decode" else 0
        seq_lens = [s + own for s in lengths] + [1] * pad
        return backends.forward_batch(
            phase,
            req_pool_indices=torch.tensor(
                list(range(self.n)) + [0] * pad, dtype=torch.int64, device=dev
            ),
            seq_lens=torch.tensor(seq_lens, dtype=torch.int64, device=dev),
            out_cache_loc=torch.tensor(out_loc, dtype=torch.int64, device=dev),
            width=width,
            positions=torch.tensor(positions, dtype=torch.int64, device=dev),
            input_ids=torch.tensor(ids, dtype=torch.int64, device=dev),
            rids=[self.rid]
            + [f"{self.rid}-companion-{i}" for i in range(1, self.n)]
            + [None] * pad,
        )

    def _gdn_metadata(self, batch, width: int):
        from sglang.srt.layers.attention.mamba.mamba2_metadata import ForwardMetadata

        bs = batch.batch_size
        kwargs = {"is_target_verify": True, "draft_token_num": width} if width > 1 else {}
        mamba = [r.slot for r in self.requests] + [-1] * (bs - self.n)
        return ForwardMetadata(
            query_start_loc=torch.arange(
                0, bs * width + 1, width, dtype=torch.int32, device=self.device
            ),
            mamba_cache_indices=torch.tensor(mamba, dtype=torch.int32, device=self.device),
            **kwargs,
        )

    def _step(self, rows: list[list[int]], phase: str) -> torch.Tensor:
        """Logits ``[bs, width, vocab]`` of one decode or verify forward of the padded batch."""
        return self._prepare(rows, phase).run()

    def prepare_step(self, phase: str, width: int) -> PreparedStep:
        """The next ``phase`` forward of every request (random drafts), ready to run again
        and again: what ``cost`` times. Running it moves no request forward."""
        rows = [
            [r.next_token, *(self.rng.randrange(self.c.vocab) for _ in range(width - 1))]
            for r in self.requests
        ]
        return self._prepare(rows, phase)

    def _prepare(self, rows: list[list[int]], phase: str) -> PreparedStep:
        """Build the batch and the backends' metadata (host work); the forward itself is
        ``run``."""
        width = len(rows[0])
        batch = self._batch(rows, phase)
        self.attn.init_forward_metadata(batch)
        self.gdn.forward_metadata = self._gdn_metadata(batch, width)
        if phase == "verify":
            self.gdn._use_strided_target_verify_qkv = self.gdn._target_verify_supports_strided_qkv(
                retrieve_parent_token=None,
                use_replayssm_fold=False,
                use_replayssm_spec=False,
                ssm_dtype=self.ssm_dtype,
                draft_token_num=width,
            )
        return PreparedStep(functools.partial(self._run, batch, phase, width))

    def _run(self, batch, phase: str, width: int) -> torch.Tensor:
        c = self.c
        self._rows = batch.input_ids.shape[0]
        if self.probe is not None:
            self.probe.begin(phase, self.requests[0].length, width)
        h = self.w.embed[batch.input_ids]
        for layer in self.layers:
            self._layer = layer.index
            x = self.rms_norm(h, layer.lw.input_norm, c.rms_eps)
            self._tap(layer.index, "input_norm", x)
            out = (
                self._gdn(layer, x, batch, phase)
                if layer.kind == "gdn"
                else self._attention(layer, x, batch, phase)
            )
            h = h + out
            x = self.rms_norm(h, layer.lw.post_norm, c.rms_eps)
            self._tap(layer.index, "post_norm", x)
            h = h + self._mlp(x, layer)
        return self._finish(h).view(batch.batch_size, width, -1)

    def _gdn(self, layer, x, batch, phase: str) -> torch.Tensor:
        from sglang.kernels.ops.attention.triton_gdn_fused_proj import (
            fused_qkvzba_split_reshape_cat_contiguous,
        )

        c = self.c
        qkvz, ba = self._beside(
            lambda: self._linear(x, layer.qkvz),
            lambda: self._linear(x, layer.ba),
            few_rows=x.shape[0] < DUAL_STREAM_TOKEN_THRESHOLD,
        )
        self._tap(layer.index, "in_proj_qkvz", qkvz)
        self._tap(layer.index, "in_proj_ba", ba)
        if phase == "decode" and self.fused_decode_proj_conv:
            # The backend runs the fused kernel where can_use_fused_... allows, else unpacks.
            core, z = self.gdn.forward_decode(layer.radix, batch, mixed_qkv=(qkvz, ba), a=ba, b=ba)
            return self._gdn_out(layer, core, z)
        mixed, z, b, a = fused_qkvzba_split_reshape_cat_contiguous(
            qkvz, ba, c.gdn_k_heads, c.gdn_v_heads, c.gdn_head_dim, c.gdn_head_dim
        )
        forward = self.gdn.forward_decode if phase == "decode" else self.gdn.forward_extend
        core = forward(layer.radix, batch, mixed_qkv=mixed, a=a, b=b)
        return self._gdn_out(layer, core, z)

    def _attention(self, layer, x, batch, phase: str) -> torch.Tensor:
        c = self.c
        q, k, v, gate = self._qkv(x, layer, batch.positions)
        k = k.view(-1, c.attn_kv_heads, c.attn_head_dim)
        v = v.view(-1, c.attn_kv_heads, c.attn_head_dim)
        forward = self.attn.forward_decode if phase == "decode" else self.attn.forward_extend
        o = forward(q.contiguous(), k.contiguous(), v, layer.radix, batch)
        o = self._gated(o.view(x.shape[0], -1), gate)
        self._tap(layer.index, "attention", o)
        out = self._linear(o, layer.w.o)
        self._tap(layer.index, "o_proj", out)
        return out
