"""The plans under benchmark/gpu/server/plans/ are valid, say how to set every variable they
use, the reporter's diagnostic runs sglang#35150's settings, and the cost plan times issue
45's four servers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gdn_parity.realserver.plan import load_plan
from gdn_parity.realserver.prompts import batch_prompts, seeded_prompts
from gdn_parity.servercost.plan import load_cost_plan
from gdn_parity.servercost.schedule import schedule

PLANS = Path(__file__).resolve().parents[2] / "benchmark" / "gpu" / "server" / "plans"


def _variables(text: str) -> set[str]:
    return set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", text))


COST_PLANS = sorted(PLANS.glob("cost-*.toml"))
VALUES = {"SSM_DTYPE": "float32"}  # a variable that is not a path


def _given(text: str) -> dict[str, str]:
    return {name: VALUES.get(name, f"/{name.lower()}") for name in _variables(text)}


@pytest.mark.parametrize("path", sorted(PLANS.glob("*.toml")), ids=lambda p: p.name)
def test_a_plan_is_valid_and_documents_its_variables(path):
    text = path.read_text()
    used = _variables(text)
    documented = set(re.findall(r"--set ([A-Z_0-9]+)=", text))
    assert used == documented
    if path in COST_PLANS:
        assert load_cost_plan(path, _given(text), {}).benchmarks
    else:
        assert load_plan(path, _given(text), {}).comparisons


def test_the_cost_plan_times_the_four_servers_at_every_accept_length():
    path = PLANS / "cost-27b.toml"
    plan = load_cost_plan(path, _given(path.read_text()), {})
    (bench,) = plan.benchmarks
    assert (plan.size, bench.batches, bench.repeats) == ("27b", (1, 4, 16, 32, 64), 3)
    assert 1024 <= bench.prompt_len <= 4096 and bench.long_tokens >= 200
    # Neither run ends on a cut-short verify at accept lengths 1 to 4.
    assert (bench.short_tokens - 1) % 12 == (bench.long_tokens - 1) % 12 == 0
    exact = ("--gdn-verify-exact-parity", "--enable-deterministic-inference")
    kinds = {name: (s.mode, s.gamma, s.args == exact) for name, s in plan.servers.items()}
    assert sorted(kinds.values(), key=str) == sorted(
        [("base", None, False), ("base", None, True), ("dspark", 1, False),
         ("dspark", 1, True), ("dspark", 3, False), ("dspark", 3, True)], key=str,
    )  # fmt: skip
    assert {kinds[e][:2] + kinds[t][:2] for e, t in bench.contract.items()} == {
        ("base", None, "base", None), ("dspark", 1, "dspark", 1), ("dspark", 3, "dspark", 3)
    }  # fmt: skip
    assert all(s.load_format == "dummy" and s.cuda_graphs for s in plan.servers.values())
    starts = schedule(plan)
    lengths = {(s.server, s.accept_length) for s in starts}
    assert len(starts) == 14 and {k for (_, k) in lengths} == {None, 1, 2, 3, 4}
    assert {plan.servers[n].gamma for n, k in lengths if k == 4} == {3}


def test_the_reporters_diagnostic_has_the_issues_settings():
    path = PLANS / "reporter-diagnostic.toml"
    plan = load_plan(path, {name: f"/{name.lower()}" for name in _variables(path.read_text())}, {})
    args = " ".join(plan.common_args)
    for flag in ("--attention-backend triton", "--max-running-requests 1",
                 "--linear-attn-prefill-backend triton", "--linear-attn-decode-backend triton",
                 "--linear-attn-verify-backend triton", "--sampling-backend pytorch"):  # fmt: skip
        assert flag in args
    control, contract = plan.comparisons
    assert (control.expect, contract.expect) == ("diverge", "identical")
    for c in plan.comparisons:
        assert (c.batches, c.max_new_tokens) == ((1,), 96)
        base, spec = plan.servers[c.base], plan.servers[c.spec]
        assert base.tree == spec.tree and base.model == spec.model
        assert not base.cuda_graphs and not spec.cuda_graphs and spec.gamma == 1
        assert dict(spec.env) == {
            "SGLANG_SIMULATE_ACC_LEN": "1.0",
            "SGLANG_SIMULATE_ACC_TOKEN_MODE": "real-draft-token",
            "SGLANG_RAGGED_VERIFY_MODE": "static",
        }
    assert str(plan.servers[control.base].tree) == "/tree_0523"
    assert str(plan.servers[contract.base].tree) == "/tree_series"
    for name in (contract.base, contract.spec):
        server = plan.servers[name]
        assert server.trace
        assert server.args == ("--gdn-verify-exact-parity", "--enable-deterministic-inference")
    assert not any(plan.servers[n].args for n in (control.base, control.spec))


def test_a_smaller_batch_has_the_first_prompts_of_a_larger_one():
    small, large = batch_prompts(4, 24, 0, 248320), batch_prompts(16, 24, 0, 248320)
    assert large[:4] == small
    assert batch_prompts(4, 24, 1, 248320)[1:] != small[1:]


def test_seeded_prompts_draw_request_0_too():
    seeded, issue = seeded_prompts(4, 24, 0, 248320), batch_prompts(4, 24, 0, 248320)
    assert seeded[1:] == issue[1:] and seeded[0] != issue[0]
    assert [len(p) for p in seeded] == [24] * 4 and len({tuple(p) for p in seeded}) == 4
    assert seeded_prompts(2, 24, 0, 248320) == seeded[:2]
