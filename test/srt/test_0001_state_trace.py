"""SGLANG_GDN_STATE_TRACE in the real GDN backend, and the drift harness against the backend.

The backend (``backend_rig``) runs a decode step and a TARGET_VERIFY batch with
sglang's GDNStateTrace attached; its records must name the right requests,
positions and tokens and digest exactly the states in the pools. The drift
harness's GDN layer, fed the same rows, must compute the same outputs, leave
the same pools and write the same records: it calls the kernels as the backend
does.
"""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

import pytest
import torch

from helpers.backend_rig import BackendRig, Shape, make_layer

S = Shape(n=2, d=3, h=1, hv=2, k=16, v=16)
INDICES = torch.tensor([2, 1], dtype=torch.int32)
RIDS = ["a", "b"]


def _sha(tensor: torch.Tensor) -> str:
    raw = tensor.contiguous().view(torch.int16) if tensor.dtype == torch.bfloat16 else tensor
    return hashlib.sha256(raw.contiguous().numpy().tobytes()).hexdigest()


def _records(path) -> list[dict]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["type"] == "header"
    return lines[1:]


@pytest.fixture
def rows():
    gen = torch.Generator().manual_seed(5)
    layer = make_layer(3, S, gen, "cpu")
    conv = torch.randn(S.n + 1, S.conv_dim, S.w - 1, generator=gen).bfloat16()
    ssm = (torch.randn(S.n + 1, S.hv, S.v, S.k, generator=gen) * 0.1).bfloat16()
    x = torch.randn(S.n * S.d, S.conv_dim, generator=gen).bfloat16()
    a = torch.randn(S.n * S.d, S.hv, generator=gen).bfloat16()
    b = torch.randn(S.n * S.d, S.hv, generator=gen).bfloat16()
    return layer, conv, ssm, x, a, b


def _rig(tmp_path, name, conv, ssm, exact_parity=False):
    from sglang.srt.layers.attention.linear.gdn_state_trace import GDNStateTrace

    trace = GDNStateTrace(str(tmp_path / name), {"model": "rig"})
    rig = BackendRig(
        3, S, INDICES, torch.bfloat16, "cpu", exact_parity=exact_parity, state_trace=trace
    )
    rig.state.conv[0][0].copy_(conv)
    rig.state.temporal[0].copy_(ssm)
    return rig, trace


def test_decode_records_the_input_state_of_each_request(sglang_tree, tmp_path, rows):
    layer, conv, ssm, x, a, b = rows
    rig, trace = _rig(tmp_path, "decode.jsonl", conv, ssm)
    positions, tokens = torch.tensor([30, 11]), torch.tensor([7, 9])
    rig.decode(layer, x[: S.n], a[: S.n], b[: S.n], RIDS, positions, tokens)
    trace.close()
    records = _records(tmp_path / "decode.jsonl")
    assert [(r["checkpoint"], r["rid"], r["pos"], r["layer"], r["token"]) for r in records] == [
        ("decode_input", "a", 30, 3, 7),
        ("decode_input", "b", 11, 3, 9),
    ]
    for r, slot in zip(records, INDICES.tolist(), strict=True):
        assert r["ssm"]["sha256"] == _sha(ssm[slot]), "the state before the step"
        assert r["conv"]["sha256"] == _sha(conv[slot])
    assert not torch.equal(rig.state.temporal[0], ssm), "the decode step did run"


def test_verify_records_the_input_and_every_step_snapshot(sglang_tree, tmp_path, rows):
    layer, conv, ssm, x, a, b = rows
    rig, trace = _rig(tmp_path, "verify.jsonl", conv, ssm)
    positions = torch.tensor([40, 41, 42, 5, 6, 7])
    tokens = torch.arange(100, 100 + S.n * S.d)
    rig.verify(layer, x, a, b, RIDS, positions, tokens)
    trace.close()
    records = _records(tmp_path / "verify.jsonl")
    inputs = [r for r in records if r["checkpoint"] == "verify_input"]
    assert [(r["rid"], r["pos"], r["token"]) for r in inputs] == [("a", 40, 100), ("b", 5, 103)]
    assert inputs[1]["ssm"]["sha256"] == _sha(ssm[1])
    steps = [r for r in records if r["checkpoint"] == "verify_step"]
    assert len(steps) == S.n * S.d
    inter_ssm = rig.state.intermediate_ssm[0]
    inter_conv = rig.state.intermediate_conv_window[0][0]
    for r in steps:
        row = RIDS.index(r["rid"])
        assert r["pos"] == positions[row * S.d + r["step"]].item() + 1
        assert r["token"] == tokens[row * S.d + r["step"]].item()
        assert r["ssm"]["sha256"] == _sha(inter_ssm[row, r["step"]])
        assert r["conv"]["sha256"] == _sha(inter_conv[row, r["step"]])


@pytest.mark.parametrize("exact_parity", [False, True], ids=["default-kernel", "exact-parity"])
def test_the_harness_gdn_layer_is_the_backend(sglang_tree, tmp_path, rows, exact_parity):
    from sglang.srt.layers.attention.linear.gdn_state_trace import GDNStateTrace

    from gdn_parity.drift.model.gdn import GDNLayer, GDNPools, TraceStep
    from gdn_parity.drift.model.kernels import load_kernels

    layer, conv, ssm, x, a, b = rows
    weights = SimpleNamespace(conv=layer.conv_weights, A_log=layer.A_log, dt_bias=layer.dt_bias)
    harness = GDNLayer(3, 0, weights, S.config, load_kernels())
    pools = GDNPools(S.config, S.d, torch.bfloat16, torch.bfloat16, "cpu")
    pools.conv[0][0].copy_(conv)
    pools.temporal[0].copy_(ssm)
    positions = torch.tensor([40, 41, 42, 5, 6, 7])
    tokens = torch.arange(100, 100 + S.n * S.d)
    batch = SimpleNamespace(rids=RIDS, positions=positions, input_ids=tokens)
    trace = GDNStateTrace(str(tmp_path / "harness.jsonl"), {"model": "rig"})
    out = harness.verify(pools, INDICES, x, a, b, exact_parity, TraceStep(trace, batch))
    trace.close()

    rig, rig_trace = _rig(tmp_path, "backend.jsonl", conv, ssm, exact_parity)
    ref = rig.verify(layer, x, a, b, RIDS, positions, tokens)
    rig_trace.close()
    assert torch.equal(out.view_as(ref), ref)
    assert torch.equal(pools.temporal[0], rig.state.temporal[0])
    assert torch.equal(pools.conv[0][0], rig.state.conv[0][0])
    assert torch.equal(pools.intermediate_ssm[0, : S.n], rig.state.intermediate_ssm[0, : S.n])
    assert _records(tmp_path / "harness.jsonl") == _records(tmp_path / "backend.jsonl")


def test_the_commit_records_the_committed_state_of_every_layer(
    sglang_tree, tmp_path, rows, monkeypatch
):
    """HybridLinearAttnBackend.update_mamba_state_after_mtp_verify writes post_commit.

    The scatter's wrapper refuses host tensors, so its two Triton kernels run on
    the host through the harness's launcher (the commit of ``gdn-parity demo``);
    the thing checked is the backend's hook: which rows, positions and layers it
    records, and that it digests the pool after the commit.
    """
    import sglang.srt.layers.attention.hybrid_linear_attn_backend as hybrid

    from gdn_parity.drift.model.commit import commit_verify
    from gdn_parity.drift.model.kernels import load_kernels

    kernels = load_kernels()
    monkeypatch.setattr(
        hybrid,
        "scatter_mamba_states_after_mtp_verify",
        lambda caches, slots, steps, *_, **__: commit_verify(kernels, caches, slots, steps),
    )
    layer, conv, ssm, x, a, b = rows
    rig, trace = _rig(tmp_path, "commit.jsonl", conv, ssm)
    positions = torch.tensor([40, 41, 42, 5, 6, 7])
    rig.verify(layer, x, a, b, RIDS, positions, torch.arange(S.n * S.d))
    snapshot = rig.state.intermediate_ssm[0, 0, 1].clone()
    rig.commit(torch.tensor([1, -1], dtype=torch.int32))  # a accepts one draft; b has no step
    trace.close()
    commits = [r for r in _records(tmp_path / "commit.jsonl") if r["checkpoint"] == "post_commit"]
    assert [(r["rid"], r["pos"], r["layer"]) for r in commits] == [("a", 42, 3)]
    assert torch.equal(rig.state.temporal[0, 2], snapshot)
    assert commits[0]["ssm"]["sha256"] == _sha(snapshot)
    assert commits[0]["conv"]["sha256"] == _sha(rig.state.intermediate_conv_window[0][0, 0, 1])
    assert torch.equal(rig.state.temporal[0, 1], ssm[1]), "the request with no step kept its state"
