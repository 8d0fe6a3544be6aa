"""gdn-parity trace-diff, on traces the drift harness writes with sglang's GDNStateTrace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gdn_parity.debug.issue35150 import INPUT_IDS
from gdn_parity.debug.trace_diff import diff_traces, read_trace
from gdn_parity.drift.run.modes import ModeKind
from gdn_parity.errors import GdnParityError


def test_the_0523_trace_parts_where_the_states_part(legacy_run, run_cli):
    """The first divergence trace-diff reports is where the harness's tensors first differ."""
    traces = legacy_run.traces
    forced = legacy_run.mode(ModeKind.FORCED_REJECT)
    # The oracle: the harness compared the committed tensors after round 1 directly.
    round1 = forced.diffs[0]
    layer = next(
        layer_id
        for layer_id, s, c in zip(
            legacy_run.gdn_layers, round1.ssm_max, round1.conv_max, strict=True
        )
        if s > 0 or c > 0
    )
    diff = diff_traces(read_trace(Path(traces["base"])), read_trace(Path(traces[forced.label])))
    first, committed = diff.first.record, diff.first_committed.record
    assert (first["pos"], first["layer"], first["checkpoint"], first["step"]) == (
        round1.pos, layer, "verify_step", 0,
    )  # fmt: skip
    assert (committed["pos"], committed["layer"], committed["checkpoint"]) == (
        round1.pos, layer, "post_commit",
    )  # fmt: skip
    proc = run_cli("trace-diff", traces["base"], traces[forced.label])
    assert proc.returncode == 1, proc.stderr
    assert f"first divergence: pos {round1.pos}, layer {layer}, verify_step[0]" in proc.stdout


def test_an_exact_parity_trace_has_no_divergence(tiny_model, tmp_path, run_cli):
    from gdn_parity.drift.run import loops
    from gdn_parity.drift.run.modes import Mode

    model = tiny_model
    start, first = loops.prefill(model, list(INPUT_IDS))
    model.start_trace(str(tmp_path / "base.jsonl"), "tiny", {"mode": "base"})
    base = loops.run_base(model, start, first, len(INPUT_IDS), 6, lambda n: None)
    model.stop_trace()
    mode = Mode(ModeKind.NATURAL, 2, 0.5)
    model.set_draft_tokens(3)
    model.start_trace(str(tmp_path / "spec.jsonl"), "tiny", {"mode": mode.label})
    drafter = loops.OracleDrafter(base.tokens, 0.5, model.c.vocab, seed=3)
    loops.run_spec(
        model, start, first, len(INPUT_IDS), mode, 6, True, drafter, lambda n: None
    )  # fmt: skip
    model.stop_trace()
    proc = run_cli("trace-diff", str(tmp_path / "base.jsonl"), str(tmp_path / "spec.jsonl"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no divergence: every compared state is bitwise equal" in proc.stdout
    diff = diff_traces(read_trace(tmp_path / "base.jsonl"), read_trace(tmp_path / "spec.jsonl"))
    checkpoints = {c.record["checkpoint"] for c in diff.compared}
    assert checkpoints == {"verify_input", "verify_step", "post_commit"}


# Hand-built traces for the alignment rules.


def _write(path: Path, records: list[dict]) -> Path:
    header = {"type": "header", "format": "sglang-gdn-state-trace", "version": 1}
    path.write_text("\n".join(json.dumps(r) for r in [header, *records]) + "\n")
    return path


def _state(checkpoint, pos, sha, layer=0, rid="r", **extra) -> dict:
    digest = {"sha256": sha, "dtype": "bfloat16", "shape": [1], "absmax": 1.0, "l2": 1.0}
    return {"type": "state", "checkpoint": checkpoint, "rid": rid, "pos": pos, "layer": layer,
            "ssm": digest, "conv": dict(digest), **extra}  # fmt: skip


def _base(rid="r") -> list[dict]:
    # Base decoded tokens 10, 11, 12, 13 at positions 4..7; state after p tokens is "s{p}".
    return [
        _state("decode_input", p, f"s{p}", rid=rid, token=10 + p - 4, token_pos=p)
        for p in range(4, 8)
    ]


def test_snapshots_after_a_rejected_draft_are_not_compared(tmp_path):
    spec = [
        _state("verify_input", 4, "s4", token=10, token_pos=4),
        _state("verify_step", 5, "s5", token=10, token_pos=4, step=0),
        _state("verify_step", 6, "junk", token=99, token_pos=5, step=1),  # wrong draft
        _state("verify_step", 7, "junk", token=12, token_pos=6, step=2),  # right token, wrong path
        _state("post_commit", 5, "s5"),
        _state("verify_input", 5, "s5", token=11, token_pos=5),
    ]
    diff = diff_traces(
        read_trace(_write(tmp_path / "b", _base())), read_trace(_write(tmp_path / "s", spec))
    )
    assert diff.first is None
    assert diff.off_path == 2
    assert [c.record["checkpoint"] for c in diff.compared] == [
        "verify_input", "verify_step", "post_commit", "verify_input",
    ]  # fmt: skip


def test_the_first_divergence_is_ordered_by_position_then_checkpoint(tmp_path):
    spec = [
        _state("verify_input", 4, "s4", token=10, token_pos=4),
        _state("verify_step", 5, "s5", layer=1, token=10, token_pos=4, step=0),
        _state("verify_step", 5, "bad", layer=2, token=10, token_pos=4, step=0),
        _state("post_commit", 5, "bad", layer=0),
        _state("verify_input", 5, "s5", layer=1, token=12, token_pos=5),
    ]
    base = _base() + [
        _state("decode_input", 5, "s5", layer=i, token=11, token_pos=5) for i in (1, 2)
    ]
    diff = diff_traces(
        read_trace(_write(tmp_path / "b", base)), read_trace(_write(tmp_path / "s", spec))
    )
    assert (diff.first.record["layer"], diff.first.record["checkpoint"]) == (2, "verify_step")
    assert (diff.first_committed.record["layer"], diff.first_committed.record["checkpoint"]) == (
        0, "post_commit",
    )  # fmt: skip
    assert diff.token_divergence == ("r", 5, 11, 12)


def test_request_ids_align_when_each_trace_holds_one(tmp_path):
    base = read_trace(_write(tmp_path / "b", _base(rid="x")))
    spec = read_trace(
        _write(tmp_path / "s", [_state("verify_input", 4, "s4", rid="y", token=10, token_pos=4)])
    )
    assert diff_traces(base, spec).rid_pairs == [("x", "y")]
    two = read_trace(_write(tmp_path / "t", _base(rid="x") + _base(rid="z")))
    with pytest.raises(GdnParityError, match="share no request id"):
        diff_traces(two, spec)


@pytest.mark.parametrize(
    "content,message",
    [
        # A record cut off in the middle: the file is still being written, or was cut.
        ('{"type": "hea\n', "line 1 is not JSON (the last line: is the file truncated"),
        # Some other text file, one line or more: its first line says what a trace is.
        ("not json\n", "line 1 is not JSON (a state trace is the JSONL file that SGLANG_"),
        ("# notes\nmore\n", "line 1 is not JSON (a state trace is the JSONL file that SGLANG_"),
        ('{"type": "state"}\n', "is not a GDN state trace"),
        ('{"type": "header", "format": "sglang-gdn-state-trace", "version": 9}\n', "version 9"),
    ],
)
def test_a_file_that_is_not_a_trace_is_refused(tmp_path, content, message, run_cli):
    path = tmp_path / "t.jsonl"
    path.write_text(content)
    proc = run_cli("trace-diff", str(path), str(path))
    assert proc.returncode == 2
    assert message in proc.stderr


def test_a_verify_step_its_rounds_rows_do_not_back_is_off_path(tmp_path, run_cli):
    """A ``step`` of 10**20 that starts its round past base's tokens, with no rows before it.
    Before: trace-diff compared every row up to it with base's tokens, a missing row equal to
    a missing token, and never ended."""
    spec = [
        _state("verify_input", 4, "s4", token=10, token_pos=4),
        _state("verify_step", 101, "x", token=10, token_pos=10**20 + 100, step=10**20),
    ]
    base, spec = _write(tmp_path / "b", _base()), _write(tmp_path / "s", spec)
    proc = run_cli("trace-diff", str(base), str(spec), timeout=120)  # before: no end
    assert proc.returncode == 0, proc.stderr
    assert "skipped 1 verify-step snapshots off base's token path" in proc.stdout
