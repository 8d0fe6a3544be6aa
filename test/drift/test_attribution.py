"""Attribution: the digests, and the first differing component on the row-wise stack.

The row-wise stack computes everything but the GDN recurrence one row at a
time, so with --gdn-verify-exact-parity every committed row must be Base's in
every component (the report says none), and with the flag off the first
difference must be the recurrence's own output. The fault injection on the
server stack (a one-ulp bump of verify's attention output) is in
``test_server_stack.py``, beside that stack's other runs.
"""

from __future__ import annotations

import pytest
import torch

from gdn_parity.debug.issue35150 import INPUT_IDS
from gdn_parity.debug.tokens import first_divergence
from gdn_parity.drift.attribute.recorder import ComponentRecorder, Perturbation
from gdn_parity.drift.attribute.report import attribution_rows, attribution_table
from gdn_parity.drift.run.modes import Mode, ModeKind
from gdn_parity.drift.run.results import (
    Attribution,
    Decoded,
    FirstDifference,
    ModeResult,
    VariantResult,
)

TOKENS = 6
P = len(INPUT_IDS)


def _record(recorder: ComponentRecorder, rows: torch.Tensor) -> list[int]:
    recorder.begin("verify", 10, rows.shape[0])
    recorder.tap(0, "attention", rows)
    flushed = recorder.flush()
    return [flushed[10 + i][0][1] for i in range(rows.shape[0])]


def test_a_digest_sees_one_ulp_and_nothing_of_the_other_rows():
    rows = torch.randn(3, 40).to(torch.bfloat16)
    recorder = ComponentRecorder()
    first = _record(recorder, rows)
    assert _record(recorder, rows.clone()) == first
    bumped = rows.clone()
    bumped[1, 17] = torch.nextafter(bumped[1, 17], torch.tensor(float("inf"), dtype=bumped.dtype))
    again = _record(recorder, bumped)
    assert again[0] == first[0] and again[2] == first[2] and again[1] != first[1]
    # a row's digest is its own: the same row alone, or beside other rows, digests the same
    assert _record(recorder, rows[1:2]) == [first[1]]


def test_a_perturbation_changes_the_live_tensor_of_its_row_only():
    rows = torch.ones(2, 4, dtype=torch.bfloat16)
    recorder = ComponentRecorder([Perturbation("verify", 3, "attention", position=11, row=1)])
    recorder.begin("decode", 11, 2)
    recorder.tap(3, "attention", rows)  # decode: not the perturbation's phase
    assert bool((rows == 1).all())
    recorder.begin("verify", 10, 2)
    recorder.tap(3, "attention", rows)
    assert rows[1, 0].item() > 1
    assert rows[0].eq(1).all() and rows[1, 1:].eq(1).all()


def test_the_table_names_the_first_component_and_says_none_when_all_agree():
    def mode(label: str, tokens: list[int], first: FirstDifference | None) -> ModeResult:
        mode = Mode(ModeKind.FORCED_REJECT, 1)
        return ModeResult(label, mode, tokens, "", 1, 1, 0, [1], [], Attribution(7, first))

    diff = FirstDifference(5, 29, 0, 3, "attention", "attention")
    result = VariantResult(
        "only-attention", True, "", "", "cuda", "tiny", "bfloat16", "torch", [0, 1, 2], P,
        Decoded([1, 2, 3, 4, 5, 6, 7], ""), [mode("a", [1, 2, 3, 4, 5, 6, 8], diff),
        mode("b", [1, 2, 3, 4, 5, 6, 7], None)], {}, 0.0, "server", True, 4, ["attention"],
    )  # fmt: skip
    table = attribution_table(attribution_rows([result]))
    lines = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    assert lines == [
        ["only-attention", "attention", "a", "6", "output 5, layer 3, attention", "attention", "7"],
        ["only-attention", "attention", "b", "-", "none", "-", "7"],
    ]


@pytest.fixture(scope="module")
def attribute(tiny_model):
    """``attribute(exact_parity, mode)``: Base and one mode on the row-wise stack, recorded."""
    from gdn_parity.drift.attribute.tracker import Attributor
    from gdn_parity.drift.run import loops

    def run(exact_parity: bool, mode: Mode):
        model = tiny_model
        with Attributor(model, P) as attributor:
            start, first = loops.prefill(model, list(INPUT_IDS))
            base = loops.run_base(
                model, start, first, P, TOKENS, lambda n: None, exact_parity, attributor
            )
            model.set_draft_tokens(mode.gamma + 1)
            attributor.start_mode(base.tokens)
            drafter = loops.OracleDrafter(base.tokens, mode.accept_rate, model.c.vocab, 0)
            spec = loops.run_spec(
                model, start, first, P, mode, TOKENS, exact_parity, drafter, lambda n: None,
                reference=base, observer=attributor,
            )  # fmt: skip
        return base, spec, attributor.result()

    return run


def test_exact_parity_on_the_row_wise_stack_attributes_nothing(attribute):
    base, spec, attribution = attribute(True, Mode(ModeKind.NATURAL, 3, 1.0))
    assert spec.accepted > 0  # multi-row commits were compared, not only anchors
    assert attribution.first is None
    assert attribution.rows_compared == TOKENS - 1  # every row Base decoded


def test_the_default_verify_kernel_is_named_as_the_first_difference(attribute):
    """Flag off, natural acceptance: the default verify kernel keeps beta in fp32 where
    decode rounds it through the activations' dtype (sglang 0.5.23's rounding, which the
    series keeps), so the first component to differ is the GDN recurrence of the verify's
    first row, in the first GDN layer."""
    base, spec, attribution = attribute(False, Mode(ModeKind.NATURAL, 3, 1.0))
    first = attribution.first
    assert first is not None, attribution
    assert (first.component, first.kind, first.layer) == ("gdn", "gdn", 0)
    assert first.row == 0
    assert first.output_index == first.position - P + 1
    token = first_divergence(base.tokens, spec.tokens)
    assert token is None or first.output_index <= token
