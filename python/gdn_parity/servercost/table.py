"""The table's rows: each cell that ran, with its TPOT over the baseline's at the same batch
and, for a server under the contract, over its twin's at the same batch and accept length.

Rows go by benchmark, then batch, then the benchmark's order of servers, then accept length:
a batch's rows sit together, so a length's exact DSpark, DSpark and Base read side by side.
"""

from __future__ import annotations

from gdn_parity.servercost.plan import CostPlan
from gdn_parity.servercost.results import Cell, Measured, Row


def table_rows(plan: CostPlan, cells: list[Cell]) -> list[Row]:
    benches = {b.name: b for b in plan.benchmarks}
    ran = {
        (c.benchmark, c.server, c.accept_length, c.batch): (c, c.measured)
        for c in cells
        if c.measured is not None
    }

    def ratio(measured: Measured, key: tuple[str, str, int | None, int]) -> float | None:
        other = ran.get(key)
        return None if other is None else measured.tpot_ms.median / other[1].tpot_ms.median

    def order(c: Cell) -> tuple[int, int, int, int]:
        b = benches[c.benchmark]
        return (
            plan.benchmarks.index(b),
            b.batches.index(c.batch),
            b.servers.index(c.server),
            c.accept_length or 0,
        )

    rows = []
    for c, measured in sorted(ran.values(), key=lambda pair: order(pair[0])):
        b = benches[c.benchmark]
        twin = b.contract.get(c.server)
        rows.append(
            Row(
                benchmark=c.benchmark,
                server=c.server,
                gamma=c.gamma,
                accept_length=c.accept_length,
                batch=c.batch,
                measured=measured,
                floor=c.floor,
                vs_baseline=ratio(measured, (c.benchmark, b.baseline, None, c.batch)),
                vs_twin=None
                if twin is None
                else ratio(measured, (c.benchmark, twin, c.accept_length, c.batch)),
                retractions=c.retractions,
            )
        )
    return rows
