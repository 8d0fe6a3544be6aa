"""The plans under benchmark/gpu/server/plans/ are valid, say how to set every variable they
use, and the reporter's diagnostic runs sglang#35150's settings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gdn_parity.realserver.plan import load_plan
from gdn_parity.realserver.prompts import batch_prompts

PLANS = Path(__file__).resolve().parents[2] / "benchmark" / "gpu" / "server" / "plans"


def _variables(text: str) -> set[str]:
    return set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", text))


@pytest.mark.parametrize("path", sorted(PLANS.glob("*.toml")), ids=lambda p: p.name)
def test_a_plan_is_valid_and_documents_its_variables(path):
    text = path.read_text()
    used = _variables(text)
    documented = set(re.findall(r"--set ([A-Z_0-9]+)=", text))
    assert used == documented
    plan = load_plan(path, {name: f"/{name.lower()}" for name in used}, {})
    assert plan.comparisons


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
