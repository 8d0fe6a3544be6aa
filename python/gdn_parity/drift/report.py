"""The demo's table: every mode of every variant against that variant's own Base decode."""

from __future__ import annotations

import math
from dataclasses import dataclass

from gdn_parity.debug.tokens import first_divergence
from gdn_parity.drift.run.results import RoundDiff, VariantResult


@dataclass(frozen=True)
class Row:
    variant: str
    label: str
    tokens: int
    divergence: str  # "index: base -> spec", or "-"
    max_state_diff: float | None  # None for Base itself
    first_state_diff_round: int | None
    accept: str
    sha256: str

    @property
    def bitwise(self) -> bool:
        """Same tokens as Base and, at every round on Base's path, the same state."""
        return self.divergence == "-" and not self.max_state_diff


def _max_diff(diffs: list[RoundDiff]) -> tuple[float, int | None]:
    worst, first = 0.0, None
    for d in diffs:
        if not d.on_path:
            continue
        value = d.max_diff
        if value > 0 and first is None:
            first = d.round
        worst = max(worst, value)
    return worst, first


def rows(results: list[VariantResult]) -> list[Row]:
    table = []
    for result in results:
        base = result.base.tokens
        table.append(
            Row(result.variant, "base", len(base), "-", None, None, "-", result.base.sha256)
        )
        for mode in result.modes:
            index = first_divergence(base, mode.tokens)
            divergence = "-"
            if index is not None:
                divergence = f"{index}: {base[index]} -> {mode.tokens[index]}"
            worst, first = _max_diff(mode.diffs)
            table.append(
                Row(
                    result.variant,
                    mode.label,
                    len(mode.tokens),
                    divergence,
                    worst,
                    first,
                    f"{mode.accepted}/{mode.proposed}",
                    mode.sha256,
                )
            )
    return table


HEADERS = (
    "variant",
    "mode",
    "tokens",
    "first divergence (base -> spec)",
    "max abs state diff",
    "from round",
    "accepted",
    "output sha256",
)


def _cells(row: Row) -> list[str]:
    if row.max_state_diff is None:
        state, since = "-", "-"
    elif row.max_state_diff == 0:
        state, since = "0 (bitwise)", "-"
    else:
        state = "nan" if math.isnan(row.max_state_diff) else f"{row.max_state_diff:.3g}"
        since = str(row.first_state_diff_round)
    return [
        row.variant,
        row.label,
        str(row.tokens),
        row.divergence,
        state,
        since,
        row.accept,
        row.sha256[:16],
    ]


def markdown_table(table: list[Row]) -> str:
    body = [_cells(r) for r in table]
    widths = [max(len(h), *(len(c[i]) for c in body)) for i, h in enumerate(HEADERS)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [line(list(HEADERS)), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    return "\n".join(out + [line(c) for c in body]) + "\n"
