"""The order of starts and stops: a Base server starts once for every comparison that names
it, servers start one at a time, and at most two are up."""

from __future__ import annotations

from gdn_parity.realserver.plan import load_plan
from gdn_parity.realserver.schedule import Start, Stop, schedule
from helpers.server_rig import toml


def _plan(tmp_path, pairs: list[tuple[str, str, str]]):
    server = {"tree": "/t", "model": "/m", "mem_fraction": 0.3}
    names = {b for _, b, _ in pairs} | {s for _, _, s in pairs}
    servers = {
        n: {**server, "mode": "dspark", "gamma": 1, "draft": "/d"} if n.startswith("s")
        else {**server, "mode": "base"}
        for n in sorted(names)
    }  # fmt: skip
    comparisons = {
        name: {"base": b, "spec": s, "batches": [1], "max_new_tokens": 4, "expect": "identical"}
        for name, b, s in pairs
    }
    path = tmp_path / "plan.toml"
    path.write_text(toml({"python": "p", "servers": servers, "comparisons": comparisons}))
    return load_plan(path, {}, {})


def _words(steps) -> list[str]:
    out = []
    for s in steps:
        if isinstance(s, Start):
            out.append(f"start {s.server}#{s.instance}")
        elif isinstance(s, Stop):
            out.append(f"stop {s.server}")
        else:
            out.append(f"compare {s.comparison.name}")
    return out


def test_comparisons_are_grouped_by_base_then_by_spec(tmp_path):
    plan = _plan(
        tmp_path,
        [("c1", "b1", "s1"), ("c2", "b2", "s1"), ("c3", "b1", "s2"), ("c4", "b1", "s1")],
    )
    assert _words(schedule(plan)) == [
        "start b1#1",
        "start s1#1", "compare c1", "compare c4", "stop s1",
        "start s2#1", "compare c3", "stop s2",
        "stop b1",
        "start b2#1",
        "start s1#2", "compare c2", "stop s1",
        "stop b2",
    ]  # fmt: skip


def test_at_most_two_servers_are_up_and_each_comparison_has_both(tmp_path):
    plan = _plan(
        tmp_path,
        [(f"c{i}", f"b{i % 3}", f"s{i % 4}") for i in range(12)],
    )
    up: set[str] = set()
    compared = []
    for step in schedule(plan):
        if isinstance(step, Start):
            assert step.server not in up
            up.add(step.server)
            assert len(up) <= 2
        elif isinstance(step, Stop):
            up.remove(step.server)
        else:
            assert {step.comparison.base, step.comparison.spec} == up
            compared.append(step.comparison.name)
    assert up == set() and sorted(compared) == sorted(f"c{i}" for i in range(12))
    base_starts = [s.server for s in schedule(plan) if isinstance(s, Start) and s.server[0] == "b"]
    assert sorted(base_starts) == ["b0", "b1", "b2"]
