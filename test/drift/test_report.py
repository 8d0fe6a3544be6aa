"""The demo table's verdict line and its full output hashes, on hand-built rows."""

from __future__ import annotations

from gdn_parity.drift.report import Row, markdown_table, verdict

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
