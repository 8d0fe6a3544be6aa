"""The demo table's verdict line, its full output hashes and what the figure plots, on
hand-built rows."""

from __future__ import annotations

import json

from gdn_parity.drift.plot import layer_curves
from gdn_parity.drift.report import Row, markdown_table, rows, verdict
from gdn_parity.drift.run.modes import Mode, ModeKind
from gdn_parity.drift.run.results import (
    Decoded,
    ModeResult,
    RoundDiff,
    VariantResult,
    results_json,
)

SHA = "ab" * 32


def _row(variant: str, label: str, divergence: str = "-", diff: float | None = 0.0) -> Row:
    return Row(variant, label, 8, divergence, diff, 1 if diff else None, "0/8", SHA)


TABLE = [
    _row("0.5.23", "base", diff=None),
    _row("0.5.23", "forced-reject g=1", "7: 1 -> 2", 0.03),
    _row("0.5.23", "forced-reject g=2", "5: 1 -> 3", 0.03),
    _row("0.5.23", "natural g=2 p=0.5", "-", 0.01),
    _row("exact-parity", "base", diff=None),
    _row("exact-parity", "forced-reject g=1"),
    _row("exact-parity", "forced-reject g=2"),
    _row("exact-parity", "natural g=2 p=0.5"),
]


def test_the_verdict_is_one_line_per_run_naming_the_earliest_divergence():
    line = verdict(TABLE)
    assert "\n" not in line
    assert line == (
        "0.5.23 diverges from Base's tokens at output index 5 (forced-reject g=2; 2 of 3 "
        "modes diverge), its state differs in 3 of 3; "
        "exact-parity keeps Base's tokens and states bitwise in all 3 modes."
    )


def test_the_table_shows_the_full_output_sha256():
    assert f"| {SHA} |" in markdown_table(TABLE)


def test_the_figure_plots_what_the_table_counts_conv_included():
    """A difference in the conv state alone shows in the figure as in the table."""
    nan = float("nan")
    diffs = [
        RoundDiff(1, 25, True, ssm_max=[0.0, 0.0], conv_max=[0.0, 0.0]),
        RoundDiff(2, 26, True, ssm_max=[0.0, 1e-3], conv_max=[4e-3, 0.0]),
        RoundDiff(3, 27, False, ssm_max=[nan, nan], conv_max=[nan, nan]),
    ]
    rounds, curves = layer_curves(diffs, 2)
    assert rounds == [1, 2]  # off Base's path: not drawn
    assert curves == [[0.0, 4e-3], [0.0, 1e-3]]
    mode = ModeResult("forced-reject g=1", Mode(ModeKind.FORCED_REJECT, 1), [1, 2, 3], SHA, 3,
                      3, 0, [3], diffs)  # fmt: skip
    result = VariantResult("v", False, "tree", "0.5.23", "cpu", "tiny", "bfloat16", "torch",
                           [0, 1], 24, Decoded([1, 2, 3], SHA), [mode], {}, 0.0)  # fmt: skip
    row = rows([result])[1]
    assert row.max_state_diff == max(max(curve) for curve in curves) == 4e-3
    assert row.first_state_diff_round == 2


def test_demo_json_is_strict_json_with_off_path_rounds_as_null() -> None:
    """A round off Base's path has NaN differences in memory; demo.json holds null there,
    which strict JSON parsers (jq's, JavaScript's) read, where a bare NaN stops them."""
    nan = float("nan")
    diffs = [
        RoundDiff(1, 25, True, ssm_max=[0.0, 1e-3], conv_max=[4e-3, 0.0]),
        RoundDiff(2, 26, False, ssm_max=[nan, nan], conv_max=[nan, nan]),
    ]
    mode = ModeResult("forced-reject g=1", Mode(ModeKind.FORCED_REJECT, 1), [1, 2], SHA, 2,
                      2, 0, [2], diffs)  # fmt: skip
    result = VariantResult("v", False, "tree", "0.5.23", "cpu", "tiny", "bfloat16", "torch",
                           [0, 1], 24, Decoded([1, 2], SHA), [mode], {}, 0.0)  # fmt: skip

    def refuse(name: str) -> None:
        raise AssertionError(f"{name} is not JSON")

    written = json.loads(results_json([result]), parse_constant=refuse)
    on_path, off_path = written[0]["modes"][0]["diffs"]
    assert (on_path["ssm_max"], on_path["conv_max"]) == ([0.0, 1e-3], [4e-3, 0.0])
    assert (off_path["ssm_max"], off_path["conv_max"]) == ([None, None], [None, None])
