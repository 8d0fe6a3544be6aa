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
        row.sha256,
    ]


def markdown_table(table: list[Row]) -> str:
    body = [_cells(r) for r in table]
    widths = [max(len(h), *(len(c[i]) for c in body)) for i, h in enumerate(HEADERS)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [line(list(HEADERS)), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    return "\n".join(out + [line(c) for c in body]) + "\n"


def _token_index(row: Row) -> int | None:
    return None if row.divergence == "-" else int(row.divergence.split(":", 1)[0])


def verdict(table: list[Row]) -> str:
    """One line: per variant, in how many speculative modes the tokens diverge from Base's
    (and at which output index first), and in how many the committed state differs."""
    clauses = []
    for variant in dict.fromkeys(r.variant for r in table):
        modes = [r for r in table if r.variant == variant and r.label != "base"]
        if not modes:
            continue
        if all(r.bitwise for r in modes):
            clauses.append(
                f"{variant} keeps Base's tokens and states bitwise in all {len(modes)} modes"
            )
            continue
        parted = [r for r in modes if _token_index(r) is not None]
        states = sum(1 for r in modes if r.max_state_diff)
        if parted:
            first = min(parted, key=lambda r: _token_index(r))
            tokens = (
                f"diverges from Base's tokens at output index {_token_index(first)} "
                f"({first.label}; {len(parted)} of {len(modes)} modes diverge)"
            )
        else:
            tokens = f"keeps Base's tokens in all {len(modes)} modes"
        clauses.append(f"{variant} {tokens}, its state differs in {states} of {len(modes)}")
    return "; ".join(clauses) + "."


LEGEND = "\n".join(
    (
        "- **first divergence**: the first output index whose token differs from the same "
        "variant's Base greedy decode (Base's token -> the mode's token); `-` when every "
        "token agrees.",
        "- **max abs state diff**: the largest absolute difference of a committed GDN state "
        "(any layer, SSM or conv) from Base's at the same position, over the rounds whose "
        "tokens still equal Base's; after the first token divergence the two runs hold "
        "different sequences and are not compared.",
        "- **from round**: the first verify round after which that committed state differs "
        "from Base's.",
        "- **A state can differ while the tokens agree**: a token is the argmax of the "
        "logits, and a small state difference moves the logits only a little. The argmax "
        "stays put until the difference, carried forward by the recurrence, grows enough "
        "(or two logits are close enough) to flip a token; so the states differ first and "
        "the tokens diverge later, or not within the run.",
        "- **forced reject is the same at every gamma**: a forced-reject round commits only "
        "verify step 0 (the anchor's row) and emits the target's argmax at that row; the "
        "drafts feed only rows 1..gamma, which are thrown away. On the row-wise stack nothing "
        "in row 0 reads a later row (the conv update and the GDN verify kernels run a "
        "request's tokens in order and store the state after each; attention is causal and "
        "computed one row at a time; everything else is per row), so every gamma commits "
        "the same states and emits the same tokens, and the rows differ only in `accepted`. "
        "On the server stack row 0 also shares GEMMs over bs*(gamma+1) rows and a verify "
        "attention kernel with the drafts, so there the rows can differ.",
        "- **accepted**: drafts accepted / drafts proposed (forced reject accepts none).",
        "- **output sha256**: sha256 of the comma-joined output ids, as `gdn-parity repro` "
        "and sglang#35150 hash them.",
        "",
    )
)
