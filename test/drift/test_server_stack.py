"""The server-faithful stack: what must hold through sglang's backends, and a control that fails.

The server stack runs a padded batch (3 requests, padded to the CUDA-graph size
4) through TritonAttnBackend and GDNAttnBackend, one GEMM per linear layer. On
the CPU test bed torch's bf16 GEMMs are row-count invariant and sglang's
batch-invariant ops do not apply (they are CUDA-only), so what these tests
exercise is the backends' own kernel choices per forward mode.
"""

from __future__ import annotations

import pytest
import torch

from gdn_parity.debug.issue35150 import INPUT_IDS
from gdn_parity.drift.attribute.components import COMPONENTS, STATES
from gdn_parity.drift.model.stacks import StackSpec, build_stack, default_stack
from gdn_parity.drift.run.modes import Mode, ModeKind

pytestmark = pytest.mark.slow  # two server-stack runs under the interpreter (~2 min)

TOKENS = 5
REQUESTS = 3  # padded to 4: one padded row in every batch


def _server(deterministic: bool, exact_parity: bool):
    """(model, prefill state, first token, Base, its Attributor: Base's rows recorded)."""
    from gdn_parity.drift.attribute.tracker import Attributor
    from gdn_parity.drift.run import loops

    model = build_stack(
        StackSpec(
            "server", "tiny", "cpu", max_len=48, deterministic=deterministic,
            exact_parity=exact_parity, requests=REQUESTS,
        )
    )  # fmt: skip
    with Attributor(model, len(INPUT_IDS)) as attributor:
        start, first = loops.prefill(model, list(INPUT_IDS))
        base = loops.run_base(
            model, start, first, len(INPUT_IDS), TOKENS, lambda n: None, exact_parity, attributor
        )
    return model, start, first, base, attributor


def _spec(harness, mode: Mode):
    from gdn_parity.drift.run import loops

    model, start, first, base, _ = harness
    model.set_draft_tokens(mode.gamma + 1)
    drafter = loops.OracleDrafter(base.tokens, mode.accept_rate, model.c.vocab, 0)
    return loops.run_spec(
        model, start, first, len(INPUT_IDS), mode, TOKENS, model.numerics.exact_parity,
        drafter, lambda n: None, reference=base,
    )  # fmt: skip


@pytest.fixture(scope="module")
def exact(sglang_tree):
    """--enable-deterministic-inference + --gdn-verify-exact-parity, on the series (0008)."""
    return _server(deterministic=True, exact_parity=True)


@pytest.fixture(scope="module")
def deterministic_only(sglang_tree):
    return _server(deterministic=True, exact_parity=False)


def test_the_batch_is_padded_as_cuda_graphs_pad_it(exact):
    model = exact[0]
    # a Base server's decode graphs: 1, 2, 4, 8, ...; a speculative server's: 1..8, 10, ...
    assert (model.n, model.padded) == (REQUESTS, {"decode": 4, "verify": 3})
    assert model.attn.verify_as_decode, "0008's route is on under deterministic inference"


def test_the_batch_size_is_the_number_of_requests(sglang_tree):
    """--batch 9: nine requests, padded to 12 in decode and 10 in verify (slot -1 rows)."""
    model = build_stack(StackSpec("server", "tiny", "cpu", max_len=32, requests=9))
    slots = list(range(1, 10))
    model.prepare_step("decode", 1)
    assert model.gdn.forward_metadata.mamba_cache_indices.tolist() == slots + [-1] * 3
    model.set_draft_tokens(2)
    model.prepare_step("verify", 2)
    assert model.gdn.forward_metadata.mamba_cache_indices.tolist() == slots + [-1]
    assert model.gdn.forward_metadata.query_start_loc.tolist() == list(range(0, 21, 2))


def test_verify_rows_compute_the_logits_of_decode_steps(exact):
    """The contract: with 0008 and the flag, a verify row is the decode step, bitwise."""
    model, start, _, base, _ = exact
    p = len(INPUT_IDS)
    model.restore(start)
    decode = torch.stack(
        [model.forward([t], p + i, "decode")[0] for i, t in enumerate(base.tokens[:3])]
    )
    model.set_draft_tokens(3)
    model.restore(start)
    verify = model.forward(base.tokens[:3], p, "verify", exact_parity=True)
    assert torch.equal(verify, decode)


@pytest.mark.parametrize("mode", [Mode(ModeKind.FORCED_REJECT, 1), Mode(ModeKind.NATURAL, 3, 1.0)])
def test_exact_variant_is_base_in_every_mode(exact, mode):
    run = _spec(exact, mode)
    assert run.tokens == exact[3].tokens
    on_path = [d for d in run.diffs if d.on_path]
    assert on_path and all(d.max_diff == 0 for d in on_path), on_path


def test_negative_control_deterministic_alone_drifts(deterministic_only):
    """Flag off, the default GDN verify kernel: multi-step commits differ from Base's state."""
    run = _spec(deterministic_only, Mode(ModeKind.NATURAL, 3, 1.0))
    assert run.accepted > 0
    assert any(d.max_diff > 0 for d in run.diffs if d.on_path)


def test_the_stacks_compute_the_same_model(exact, tiny_model):
    """Row-wise and server stacks: one model, so the same Base tokens and close logits.

    Not bitwise: the server's RMSNorms are sglang's Triton kernels, the row-wise
    stack's torch. A wrong weight layout, rope position or KV slot fails this.
    """
    from gdn_parity.drift.run import loops

    server, start, first, base, _ = exact
    rw_start, rw_first = loops.prefill(tiny_model, list(INPUT_IDS))
    rw_base = loops.run_base(tiny_model, rw_start, rw_first, len(INPUT_IDS), TOKENS, lambda n: 0)
    assert rw_base.tokens == base.tokens
    p = len(INPUT_IDS)
    tiny_model.restore(rw_start)
    server.restore(start)
    ours = server.forward([base.tokens[0]], p, "decode")
    theirs = tiny_model.forward([base.tokens[0]], p, "decode")
    assert torch.allclose(ours, theirs, atol=2e-2 * theirs.abs().max().item())


def test_attribution_names_a_perturbed_verify_attention_at_its_output_index(exact):
    """A one-ulp bump of verify's attention output in the anchor row at P+3 (round 3) is
    the first difference; the same bump in a draft row that is not committed is not."""
    from gdn_parity.drift.attribute.recorder import Perturbation
    from gdn_parity.drift.run import loops

    model, start, first, base, attributor = exact  # Base's rows are recorded
    p = len(INPUT_IDS)
    attention = model.c.attention_layers[0]
    with attributor:
        attributor.recorder.perturbations = [
            Perturbation("verify", attention, "attention", position=p + 1, row=1),
            Perturbation("verify", attention, "attention", position=p + 3, row=0),
        ]
        attributor.start_mode(base.tokens)
        model.set_draft_tokens(2)
        mode = Mode(ModeKind.FORCED_REJECT, 1)
        drafter = loops.OracleDrafter(base.tokens, 1.0, model.c.vocab, 0)
        loops.run_spec(
            model, start, first, p, mode, TOKENS, True, drafter, lambda n: None,
            reference=base, observer=attributor,
        )  # fmt: skip
        attributor.recorder.perturbations = []
    found = attributor.result()
    assert found.rows_compared == TOKENS - 1
    assert found.first is not None
    assert (found.first.output_index, found.first.layer) == (4, attention)
    assert (found.first.component, found.first.kind, found.first.row) == ("attention",) * 2 + (0,)


def test_timing_a_step_leaves_the_model_as_it_was(exact):
    """``cost`` times decode and then verify on one prefilled model: timing must not move it.
    (On CPU the times are the interpreter's; only the plumbing is checked.)"""
    from gdn_parity.drift.cost.timing import time_step

    model, start, *_ = exact
    model.restore(start)
    before = model.snapshot()
    timed = time_step(model, "decode", 1, replays=1, graphs=True, bandwidth=1e12, warmup=0)
    after = model.snapshot()
    assert after.requests == before.requests
    assert all(torch.equal(a, b) for a, b in zip(after.gdn, before.gdn, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(after.keys, before.keys, strict=True))
    assert (timed.requests, timed.padded, timed.width, timed.graph) == (REQUESTS, 4, 1, False)
    assert timed.median_ms > 0 and "need --device cuda" in timed.note
    assert timed.floor_ms == pytest.approx(timed.bytes / 1e12 * 1e3)


def test_cost_profile_adds_the_steps_kernels_and_leaves_the_model_as_it_was(exact):
    """``cost --profile``: the step's kernels (here the interpreter's torch ops), longest first,
    and the model unmoved, as without it; without it, no kernels."""
    from gdn_parity.drift.cost.timing import time_step

    model, start, *_ = exact
    model.restore(start)
    before = model.snapshot()
    plain = time_step(model, "verify", 2, replays=1, graphs=False, bandwidth=1e12, warmup=0)
    profiled = time_step(
        model, "verify", 2, replays=1, graphs=False, bandwidth=1e12, warmup=0, profile=True
    )
    after = model.snapshot()
    assert plain.kernels == []
    assert profiled.kernels and sum(k.ms for k in profiled.kernels) > 0
    assert [k.ms for k in profiled.kernels] == sorted(
        (k.ms for k in profiled.kernels), reverse=True
    )
    assert all(torch.equal(a, b) for a, b in zip(after.gdn, before.gdn, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(after.keys, before.keys, strict=True))


def test_a_snapshot_is_a_host_copy_that_restore_puts_back(exact):
    """``ServerModel.snapshot`` copies to host memory: a copy, not a view, also where the
    model is on the CPU, or restoring it would be a no-op (fails with ``.to("cpu")`` alone).
    That a CUDA model's snapshot leaves the GPU: the test below."""
    model, start, *_ = exact
    model.restore(start)
    snap = model.snapshot()
    pool = model.attn.token_to_kv_pool
    live = (model.state.temporal, model.state.conv[0], pool.k_buffer[0], pool.v_buffer[0])
    copies = (*snap.gdn, snap.keys[0], snap.values[0])
    assert all(c.device.type == "cpu" for c in (*snap.gdn, *snap.keys, *snap.values))
    for tensor in live:
        tensor.add_(1)
    assert not any(torch.equal(t.cpu(), c) for t, c in zip(live, copies, strict=True))
    model.restore(snap)
    assert all(torch.equal(t.cpu(), c) for t, c in zip(live, copies, strict=True))


@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="where a CUDA model's snapshot lives needs a CUDA device, and this machine has none",
)
def test_a_cuda_models_snapshot_is_in_host_memory():
    """A 27B's SSM states at batch 64 are 4.6 GiB that the GPU does not have to spare
    (``footprint`` counts no snapshot): the snapshot's copies are on the host."""
    from gdn_parity.drift.model.server.model import _host_copy

    state = torch.arange(8, dtype=torch.bfloat16, device="cuda")
    copy = _host_copy(state)
    assert copy.device.type == "cpu" and torch.equal(copy, state.cpu())


def test_the_footprint_counts_the_pools_the_stack_allocates(exact):
    """``cost`` and ``demo`` refuse a run that does not fit the GPU from ``footprint``'s
    estimate: its GDN and KV pool terms must be what the server stack allocates, at each
    verify width (a term left out let a 27B run out of memory on an H100)."""
    from gdn_parity.drift.model.footprint import RunHolds, gdn_pool_bytes, kv_pool_bytes

    model = exact[0]
    width = model.draft_tokens
    try:
        for draft_tokens in (1, 4):
            model.set_draft_tokens(draft_tokens)
            state = model.state
            gdn = (
                state.temporal,
                *state.conv,
                state.intermediate_ssm,
                *state.intermediate_conv_window,
            )
            pool = model.attn.token_to_kv_pool
            holds = RunHolds(REQUESTS, draft_tokens, context=model.max_len)
            assert gdn_pool_bytes(model.c, 2, 2, holds) == sum(t.nbytes for t in gdn)
            kv = sum(b.nbytes for b in (*pool.k_buffer, *pool.v_buffer))
            assert kv_pool_bytes(model.c, 2, holds) == kv
    finally:
        model.set_draft_tokens(width)


def test_stack_defaults_and_refusals():
    assert default_stack("cuda") == "server" and default_stack("cpu") == "rowwise"
    with pytest.raises(ValueError, match="--stack server"):
        build_stack(StackSpec("rowwise", "tiny", "cpu", max_len=8, deterministic=True))


@pytest.mark.parametrize("attention", ["torch", "sglang-triton"])
def test_the_row_wise_stack_names_gdn_live_only_without_the_flag(sglang_tree, attention):
    """The Attribution table's live sources (before: gdn in every row-wise run, the flag's too)."""

    def live(flag: bool) -> list[str]:
        spec = StackSpec("rowwise", "tiny", "cpu", max_len=8, attention=attention,
                         exact_parity=flag)  # fmt: skip
        return build_stack(spec).live_sources()

    triton = ["attention"] if attention == "sglang-triton" else []
    assert (live(False), live(True)) == (triton + ["gdn"], triton)


class _DtypeProbe:
    """Records the dtype of every component output the server stack hands a probe in
    decode and verify (the recorder's protocol: prefill is not recorded)."""

    active = False
    width = 0

    def __init__(self) -> None:
        self.dtypes: dict[str, set[torch.dtype]] = {}

    def begin(self, phase: str, start: int, width: int) -> None:
        self.active, self.width = phase != "prefill", width

    def tap(self, layer: int, component: str, rows) -> None:
        for row in rows if isinstance(rows, list) else [rows]:
            self.dtypes.setdefault(component, set()).add(row.dtype)


def test_dtype_float16_runs_the_server_stack_in_float16(sglang_tree):
    """--dtype float16: weights, every component's output (GEMMs, norms, attention, conv,
    GDN) and the KV pool are fp16; the conv state stays bf16 (sglang's default)."""
    from gdn_parity.drift.run import loops

    model = build_stack(StackSpec("server", "tiny", "cpu", max_len=32, requests=2, dtype="float16"))
    probe = _DtypeProbe()
    model.attach_probe(probe)
    start, first = loops.prefill(model, list(INPUT_IDS))
    loops.run_base(model, start, first, len(INPUT_IDS), 2, lambda n: None, False, None)
    model.attach_probe(None)
    assert set(COMPONENTS) - set(STATES) == probe.dtypes.keys()
    assert all(dtypes == {torch.float16} for dtypes in probe.dtypes.values()), probe.dtypes
    assert model.attn.token_to_kv_pool.k_buffer[0].dtype == torch.float16
    ssm, conv = model.gdn_state()
    assert (ssm.dtype, conv.dtype) == (torch.bfloat16, torch.bfloat16)


def _tiny_gated(monkeypatch):
    """Size "tiny-gated": the 27B sizes' attention (output gate, rotary on half of each head,
    rope theta 1e7) at tiny widths, weights drawn on the device's generator."""
    import dataclasses

    from gdn_parity.drift.model.config import SIZES

    gated = dataclasses.replace(
        SIZES["tiny"], name="tiny-gated", attn_output_gate=True, partial_rotary_factor=0.5,
        rope_theta=1e7, gpu_only=True,
    )  # fmt: skip
    monkeypatch.setitem(SIZES, "tiny-gated", gated)
    return gated


def test_qwen35_27b_attention_in_both_stacks(sglang_tree, monkeypatch):
    """The 27B sizes' attention (the sigmoid output gate from q_proj's per-head gate rows,
    rotary on a part of each head) at tiny widths, weights drawn on the device's
    generator: row-wise and server stacks compute one model (Base tokens equal, logits
    close: a wrong gate split or rotary width fails), and the exact server stack's forced
    reject is bitwise Base."""
    from gdn_parity.drift.model.config import SIZES
    from gdn_parity.drift.model.hybrid import HybridModel
    from gdn_parity.drift.run import loops

    _tiny_gated(monkeypatch)
    assert SIZES["27b"].attn_q_dim == 2 * 24 * 256 and SIZES["27b"].rotary_dim == 64
    p = len(INPUT_IDS)
    rowwise = HybridModel.build("tiny-gated", "cpu", max_len=48)
    rw_start, rw_first = loops.prefill(rowwise, list(INPUT_IDS))
    rw_base = loops.run_base(rowwise, rw_start, rw_first, p, TOKENS, lambda n: 0)
    server = build_stack(
        StackSpec(
            "server", "tiny-gated", "cpu", max_len=48, deterministic=True, exact_parity=True,
            requests=REQUESTS,
        )
    )  # fmt: skip
    start, first = loops.prefill(server, list(INPUT_IDS))
    base = loops.run_base(server, start, first, p, TOKENS, lambda n: None, True)
    assert base.tokens == rw_base.tokens
    rowwise.restore(rw_start)
    server.restore(start)
    ours = server.forward([base.tokens[0]], p, "decode")
    theirs = rowwise.forward([base.tokens[0]], p, "decode")
    assert torch.allclose(ours, theirs, atol=2e-2 * theirs.abs().max().item())
    run = _spec((server, start, first, base, None), Mode(ModeKind.FORCED_REJECT, 1))
    assert run.tokens == base.tokens
    assert all(d.max_diff == 0 for d in run.diffs if d.on_path)


def test_qwen35_attention_prepares_qkv_with_sglangs_fused_kernel(sglang_tree, monkeypatch):
    """With the output gate, every attention forward (prefill, decode, verify) prepares q, k
    and the gate with sglang's ``fused_qk_gemma_rmsnorm_rope_gate``, as qwen3_5.py's
    ``forward_prepare_cuda_fused`` does on CUDA (the views of the fused qkv, the rows'
    positions, eps, GemmaRMSNorm's stored weights: the multiplier less one, and
    RotaryEmbedding's fp32 cos/sin cache), and attention gets the kernel's q and k."""
    from sglang.kernels.ops.attention import fused_qk_rmsnorm_rope_gate as fused

    from gdn_parity.drift.run import loops

    gated = _tiny_gated(monkeypatch)
    calls, attended = [], []
    kernel = fused.fused_qk_gemma_rmsnorm_rope_gate

    def spy(q_gate, k, q_weight, k_weight, cache, positions, *args, **kwargs):
        out = kernel(q_gate, k, q_weight, k_weight, cache, positions, *args, **kwargs)
        strides = (q_gate.stride(0), k.stride(0))
        calls.append((positions.tolist(), q_weight, k_weight, cache, strides, args, kwargs, out))
        return out

    monkeypatch.setattr(fused, "fused_qk_gemma_rmsnorm_rope_gate", spy)
    server = build_stack(
        StackSpec("server", "tiny-gated", "cpu", max_len=48, requests=2, exact_parity=True)
    )
    server.set_draft_tokens(2)  # the pools verify needs (this rebuilds the backends)
    for name in ("forward_decode", "forward_extend"):
        forward = getattr(server.attn, name)

        def recorded(q, k, *rest, _forward=forward):
            attended.append((q, k))
            return _forward(q, k, *rest)

        monkeypatch.setattr(server.attn, name, recorded)
    start, first = loops.prefill(server, list(INPUT_IDS))
    p, layers = len(INPUT_IDS), len(gated.attention_layers)
    prompts = [p, p - 3]  # companion_prompts: request i's prompt is 3 * i tokens shorter
    assert [c[0] for c in calls] == [list(range(n)) for n in prompts for _ in range(layers)]
    calls.clear()
    server.forward([first], start.requests[0][0], "decode")
    # decode pads 2 requests to 2 rows: request 0 at p, request 1 at p - 3
    assert [c[0] for c in calls] == [[p, p - 3]] * layers
    decode_calls = list(calls)
    calls.clear()
    server.forward([first, first], p + 1, "verify", exact_parity=True)
    assert [c[0] for c in calls] == [[p + 1, p + 2, p - 2, p - 1]] * layers
    heads, kv, dim, rot = (
        gated.attn_heads,
        gated.attn_kv_heads,
        gated.attn_head_dim,
        gated.rotary_dim,
    )
    # RotaryEmbedding's cache for theta 1e7 (neox: cos then sin), computed here in fp32
    t = torch.arange(48, dtype=torch.float)
    angles = torch.outer(t, 1.0 / (1e7 ** (torch.arange(0, rot, 2, dtype=torch.float) / rot)))
    expected_cache = torch.cat([angles.cos(), angles.sin()], -1)
    qkv_width = gated.attn_q_dim + 2 * kv * dim
    for _, q_weight, k_weight, cache, strides, args, kwargs, _ in decode_calls + calls:
        assert args == (gated.rms_eps, heads, kv, dim, rot) and kwargs == {"has_gate": True}
        assert strides == (qkv_width, qkv_width)  # views of the fused qkv, as the server's
        assert not q_weight.any() and not k_weight.any()  # the multiplier: ones
        assert cache.dtype == torch.float32 and torch.equal(cache, expected_cache)
    # attention gets the kernel's q and k: decode's layers, then verify's
    assert len(attended) == 2 * layers
    for (q, k), (*_, (q_out, k_out, _gate)) in zip(attended, decode_calls + calls, strict=True):
        assert torch.equal(q.reshape(q_out.shape), q_out)
        assert torch.equal(k.reshape(k_out.shape), k_out)


@pytest.mark.parametrize("deterministic", [False, True])
def test_decode_picks_lean_as_a_server_does_in_and_out_of_capture(sglang_tree, deterministic):
    """``--enable-lean-attention``'s default (None): the Triton backend's decode asks its
    capture policy (by the padded batch) in sglang's capture mode, where ``cost`` warms up and
    captures, and its context gate in eager forwards; under deterministic inference neither
    (no Lean). Before: the stack forced Lean off, so default variants' graphs never baked it
    where a server's would (the 27B's heads at 16 or more padded rows)."""
    from gdn_parity.drift.run import loops

    server = build_stack(
        StackSpec("server", "tiny", "cpu", max_len=32, requests=2, deterministic=deterministic)
    )
    _, first = loops.prefill(server, list(INPUT_IDS)[:8])
    asked = []
    server.attn._lean_capture_policy = lambda *a, **k: asked.append("capture") or False
    server.attn._lean_decode_seqlen_gate = lambda *a, **k: asked.append("context") or False
    layers = len(server.c.attention_layers)
    with server.capture_mode():
        server.forward([first], 8, "decode")
    server.forward([first], 9, "decode")
    assert asked == ([] if deterministic else ["capture"] * layers + ["context"] * layers)
