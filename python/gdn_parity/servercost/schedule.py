"""The order of a cost run: one start per server and accept length, decided before anything
starts.

One server is up at a time: two would share the GPU and time each other. A DSpark server
starts once per simulated accept length, because sglang 0.5.23 reads
``SGLANG_SIMULATE_ACC_LEN`` once, when its DSpark worker starts
(``dspark_worker_v2.py``: ``self._simulate_acc_len``). Starts follow the plan: benchmarks in
order, each one's servers in its order, accept lengths upwards; a start a later benchmark
needs again runs that benchmark too.
"""

from __future__ import annotations

from dataclasses import dataclass

from gdn_parity.servercost.plan import CostPlan


@dataclass(frozen=True)
class CostStart:
    server: str
    accept_length: int | None  # SGLANG_SIMULATE_ACC_LEN; None: a Base server
    benchmarks: tuple[str, ...]  # timed on it, in the plan's order

    @property
    def label(self) -> str:
        """Its logs' name: the server's, with ``+acc<k>`` on DSpark (no plan name has a +)."""
        return (
            self.server if self.accept_length is None else f"{self.server}+acc{self.accept_length}"
        )


def schedule(plan: CostPlan) -> list[CostStart]:
    starts: dict[tuple[str, int | None], list[str]] = {}
    for b in plan.benchmarks:
        for name in b.servers:
            for k in b.lengths_on(plan.servers[name]):
                starts.setdefault((name, k), []).append(b.name)
    return [CostStart(name, k, tuple(names)) for (name, k), names in starts.items()]
