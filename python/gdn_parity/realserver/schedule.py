"""The order of a run: server starts, comparisons and stops, decided before anything starts.

Servers start one after another, and at most two are up at a time, a Base server and a
speculative one. sglang 0.5.23 sizes a server's KV pool from the GPU memory free when it
starts (``kv_cache_configurator._profile_available_bytes``: the free memory less
``1 - mem_fraction_static`` of what was free before its weights loaded). Two servers
starting at once each count the other's memory as free, and one found no room for its KV
cache; one after another, the second's fraction is a share of what the first left.

Comparisons are grouped by Base server, in the plan's order of first mention, and within
a Base server by speculative server: a Base server starts once, and a speculative server
once per Base server it is compared with. A server compared with itself (``reference =
"alone"``) is not started twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from gdn_parity.realserver.plan import ComparisonSpec, RunPlan


@dataclass(frozen=True)
class Start:
    server: str
    instance: int  # 1 for a server's first start, 2 for its second, ...


@dataclass(frozen=True)
class Compare:
    comparison: ComparisonSpec


@dataclass(frozen=True)
class Stop:
    server: str


Step = Start | Compare | Stop


def schedule(plan: RunPlan) -> list[Step]:
    groups: dict[str, dict[str, list[ComparisonSpec]]] = {}
    for c in plan.comparisons:
        groups.setdefault(c.base, {}).setdefault(c.spec, []).append(c)
    starts: dict[str, int] = {}

    def start(server: str) -> Start:
        starts[server] = starts.get(server, 0) + 1
        return Start(server, starts[server])

    steps: list[Step] = []
    for base, specs in groups.items():
        steps.append(start(base))
        for spec, comparisons in specs.items():
            if spec == base:  # a server against itself alone ("reference = alone")
                steps += [Compare(c) for c in comparisons]
                continue
            steps.append(start(spec))
            steps += [Compare(c) for c in comparisons]
            steps.append(Stop(spec))
        steps.append(Stop(base))
    return steps
