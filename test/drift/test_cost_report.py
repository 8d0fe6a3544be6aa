"""The cost table: medians with their spread, and ratios to the first variant."""

from __future__ import annotations

from gdn_parity.drift.cost.report import cost_table
from gdn_parity.drift.cost.results import StepTime, VariantCost


def _variant(name: str, decode: tuple[float, float, float], verify: tuple[float, float, float]):
    def step(phase: str, width: int, times: tuple[float, float, float]) -> StepTime:
        median, low, p90 = times
        return StepTime(phase, 4, 4, width, median, low, p90, 50, True, "")

    steps = [step("decode", 1, decode), step("verify", 4, verify)]
    return VariantCost(name, "tree", "cuda", "large", "bfloat16", ["gdn"], steps, 1.0)


def test_rows_show_median_min_p90_and_the_ratio_to_the_first_variant():
    table = cost_table(
        [
            _variant("0.5.23", (2.0, 1.9, 2.2), (4.0, 3.8, 4.4)),
            _variant("exact", (2.5, 2.4, 2.9), (5.0, 4.9, 5.5)),
        ],
        [4],
    )
    rows = [line.split("|")[1:-1] for line in table.splitlines()[2:]]
    cells = [[c.strip() for c in row] for row in rows]
    assert cells[0][4:8] == ["2.000 (1.900-2.200)", "4.000 (3.800-4.400)", "1.00x", "1.00x"]
    assert cells[1][4:8] == ["2.500 (2.400-2.900)", "5.000 (4.900-5.500)", "1.25x", "1.25x"]
