"""The attribution table: per variant and mode, the first token and component to differ."""

from __future__ import annotations

from dataclasses import dataclass

from gdn_parity.debug.tokens import first_divergence
from gdn_parity.drift.attribute.components import FINAL
from gdn_parity.drift.run.results import VariantResult


@dataclass(frozen=True)
class AttributionRow:
    variant: str
    live: str  # the sources left as a default server computes them
    label: str
    token: str  # the first output index whose token differs from Base's, or "-"
    first: str  # "output i, layer l, component (kind)", or "none"
    kind: str  # the first difference's kind, or "-"
    rows: int  # committed rows compared with Base


def attribution_rows(results: list[VariantResult]) -> list[AttributionRow]:
    table = []
    for result in results:
        live = ", ".join(result.live_sources) or "none"
        for mode in result.modes:
            if mode.attribution is None:
                continue
            index = first_divergence(result.base.tokens, mode.tokens)
            first = mode.attribution.first
            where = "none"
            if first is not None:
                layer = "final" if first.component in FINAL else f"layer {first.layer}"
                where = f"output {first.output_index}, {layer}, {first.component}"
                if first.row:
                    where += f" (verify row {first.row})"
            table.append(
                AttributionRow(
                    result.variant,
                    live,
                    mode.label,
                    "-" if index is None else str(index),
                    where,
                    first.kind if first is not None else "-",
                    mode.attribution.rows_compared,
                )
            )
    return table


HEADERS = (
    "variant",
    "live sources",
    "mode",
    "first token divergence",
    "first component divergence",
    "kind",
    "rows compared",
)


def attribution_table(table: list[AttributionRow]) -> str:
    body = [[r.variant, r.live, r.label, r.token, r.first, r.kind, str(r.rows)] for r in table]
    widths = [max(len(h), *(len(c[i]) for c in body)) for i, h in enumerate(HEADERS)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [line(list(HEADERS)), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    return "\n".join(out + [line(c) for c in body]) + "\n"


LEGEND = "\n".join(
    (
        "- **live sources**: the sources of decode/verify difference this run computes as a "
        "default server does (gemm: torch's GEMMs, not batch-invariant; attention: verify "
        "through the extend kernels, not the decode kernel; conv: decode's fused "
        "projection/conv kernel, not the kernel verify runs; gdn: the default verify kernel, "
        "not --gdn-verify-exact-parity); the others are exact.",
        "- **first component divergence**: every row a verify round commits (the anchor and "
        "the accepted drafts), while its tokens are Base's, is compared with Base decode's "
        "row at the same position, component by component in the order the model computes "
        "them, and the GDN state after each commit with Base's; the first output that is "
        "not bitwise equal is named, with the output token whose logits that row computes. "
        "`none`: every compared row and state is bitwise Base's.",
        "- **kind**: gemm (a linear layer), norm, attention, conv (the conv1d output or "
        "state), gdn (the recurrence's output or state). A difference propagates to every "
        "later component, so only the first names a source.",
        "- **rows compared**: committed rows on Base's path compared with Base's.",
        "",
    )
)
