"""A plan is checked in full before anything starts: one line naming the key, exit 2, nothing
written. Variables come from --set, else the environment."""

from __future__ import annotations

import copy
import dataclasses
import re
import sys
from pathlib import Path

import pytest

from gdn_parity.realserver.plan import EXAMPLE, PlanError, check_paths, load_plan
from helpers.cli import assert_refused
from helpers.server_rig import toml

PLANS = Path(__file__).resolve().parents[2] / "benchmark" / "gpu" / "server" / "plans"


def _good() -> dict:
    server = {"tree": "/t", "model": "/m", "mem_fraction": 0.4}
    return {
        "python": "python3",
        "common": {"args": ["--attention-backend", "triton"], "env": {"A": "1"}},
        "servers": {
            "base": {**server, "mode": "base"},
            "spec": {**server, "mode": "dspark", "gamma": 1, "draft": "/d"},
        },
        "comparisons": {
            "c": {"base": "base", "spec": "spec", "batches": [1, 4], "max_new_tokens": 8,
                  "expect": "identical"},
        },
    }  # fmt: skip


def _load(tmp_path, data: dict, given: dict | None = None, environ: dict | None = None):
    path = tmp_path / "plan.toml"
    path.write_text(toml(data))
    return load_plan(path, given or {}, environ or {})


def test_a_good_plan_reads_as_written(tmp_path):
    plan = _load(tmp_path, _good())
    spec = plan.servers["spec"]
    assert (spec.mode, spec.gamma, str(spec.draft), spec.cuda_graphs, spec.trace) == (
        "dspark", 1, "/d", True, False,
    )  # fmt: skip
    assert spec.load_format == "auto" and spec.start_timeout == 900
    (c,) = plan.comparisons
    assert (c.batches, c.prompt_len, c.prompt_seed, c.expect) == ((1, 4), 24, 0, "identical")
    assert plan.common_args == ("--attention-backend", "triton")


def _set(path: str, value):
    def change(data: dict) -> None:
        *keys, last = path.split(".")
        for key in keys:
            data = data[key]
        if value is KeyError:
            del data[last]
        else:
            data[last] = value

    return change


BAD = [
    (_set("bogus", 1), "plan.toml: bogus: is not a known key"),
    (_set("servers.base.gama", 1), "servers.base.gama: is not a known key"),
    (_set("comparisons.c.batch", [1]), "comparisons.c.batch: is not a known key"),
    (_set("common.argv", []), "common.argv: is not a known key"),
    (_set("python", KeyError), "python: is missing"),
    (_set("servers.base.mem_fraction", KeyError), "servers.base.mem_fraction: is missing"),
    (_set("comparisons.c.spec", "nope"), "comparisons.c.spec: names no server ('nope'"),
    (_set("comparisons.c.base", "spec"), 'comparisons.c.base: spec is mode = "dspark", not'),
    (_set("servers.spec.gamma", KeyError), 'servers.spec.gamma: is missing (mode = "dspark"'),
    (_set("servers.base.gamma", 2), 'servers.base.gamma: is for mode = "dspark" only'),
    (_set("servers.spec.gamma", 0), "servers.spec.gamma: must be an integer of at least 1"),
    (_set("servers.spec.gamma", True), "servers.spec.gamma: must be an integer"),
    (_set("servers.base.mode", "eagle"), "servers.base.mode: must be one of base, dspark"),
    (_set("comparisons.c.batches", []), "comparisons.c.batches: must be a non-empty list"),
    (_set("comparisons.c.batches", [4, 4]), "comparisons.c.batches: names a batch size twice"),
    (_set("comparisons.c.batches", [0]), "comparisons.c.batches[0]: must be an integer of at"),
    (_set("comparisons.c.expect", "same"), "comparisons.c.expect: must be one of identical,"),
    (_set("comparisons.c.reference", "solo"), "comparisons.c.reference: must be one of batch,"),
    (_set("servers.base.mem_fraction", 1.5), "servers.base.mem_fraction: must be a number betw"),
    (_set("common.args", ["--port", "1"]), "common.args: --port is the runner's to pass"),
    (_set("servers.spec.args", ["--disable-cuda-graph"]), "(set by: cuda_graphs = false)"),
    (_set("servers.base.args", ["--mem-fraction-static=0.5"]), "(set by: mem_fraction)"),
    (_set("servers.base.trace", True), "servers.base.trace: needs cuda_graphs = false"),
    (_set("common.env", {"N": 1}), 'common.env.N: must be a string: write N = "1"'),
    (_set("servers.base.env", {"SGLANG_GDN_STATE_TRACE": "/x"}), "set trace = true"),
    (_set("servers.base.tree", "${NOPE}/t"), "${NOPE} not set (pass --set NOPE=..., or export"),
    (_set("servers.base.start_timeout", -1), "must be a number of seconds above 0"),
    (_set("comparisons.c.prompt_len", 0), "comparisons.c.prompt_len: must be an integer of at"),
    (_set("comparisons.c.prompt_vocab", 1), "comparisons.c.prompt_vocab: must be an integer of"),
    (
        _set("servers.x", {"tree": "/t", "mode": "base", "model": "/m", "mem_fraction": 0.1}),
        "servers.x: is in no comparison",
    ),  # fmt: skip
    (_set("servers.a b", {}), "servers.a b: is not a usable name"),
    (_set("comparisons", {}), "comparisons: names no comparison"),
    (_set("servers", []), "servers: must be a table"),
]


@pytest.mark.parametrize("change,fragment", BAD, ids=[b[1][:40] for b in BAD])
def test_a_bad_plan_is_refused_naming_the_key(tmp_path, change, fragment):
    data = copy.deepcopy(_good())
    change(data)
    with pytest.raises(PlanError) as refused:
        _load(tmp_path, data)
    assert fragment in str(refused.value)
    assert "\n" not in str(refused.value)


def test_alone_lets_a_speculative_server_be_its_own_reference_and_compares_tokens_only(
    tmp_path,
):
    data = copy.deepcopy(_good())
    data["comparisons"]["c"] |= {"base": "spec", "reference": "alone"}
    del data["servers"]["base"]
    (c,) = _load(tmp_path, data).comparisons
    assert (c.base, c.spec, c.reference) == ("spec", "spec", "alone")
    data["servers"]["spec"] |= {"cuda_graphs": False, "trace": True}
    with pytest.raises(PlanError, match=r'comparisons\.c\.reference: "alone" compares tokens only'):
        _load(tmp_path, data)


def test_too_few_distinct_prompts_is_refused(tmp_path):
    data = _good()
    data["comparisons"]["c"] |= {"prompt_vocab": 2, "prompt_len": 1}  # 2 prompts, batch 4
    with pytest.raises(PlanError, match=r"2 distinct prompts, fewer than batch 4"):
        _load(tmp_path, data)


def test_invalid_toml_is_refused(tmp_path):
    path = tmp_path / "plan.toml"
    path.write_text("python = \n")
    with pytest.raises(PlanError, match=r"plan.toml is not valid TOML"):
        load_plan(path, {}, {})


def test_set_wins_over_the_environment(tmp_path):
    data = _good()
    data["servers"]["base"]["tree"] = "${TREE}/x"
    data["common"]["env"] = {"B": "${TREE}"}
    plan = _load(tmp_path, data, given={"TREE": "/given"}, environ={"TREE": "/env"})
    assert str(plan.servers["base"].tree) == "/given/x"
    assert plan.common_env["B"] == "/given"
    plan = _load(tmp_path, data, environ={"TREE": "/env"})
    assert str(plan.servers["base"].tree) == "/env/x"


def _real(rig) -> dict:
    """A plan of the rig's real paths (the fake tree, model and draft)."""
    return {
        "python": sys.executable,
        "servers": {"base": rig.server(name="base"), "spec": rig.server("dspark", 2, name="s")},
        "comparisons": {"c": {"base": "base", "spec": "spec", "batches": [1],
                              "max_new_tokens": 4, "expect": "identical"}},
    }  # fmt: skip


@pytest.mark.parametrize(
    "change,fragment",
    [
        (_set("servers.base.tree", "/nonexistent"), "/nonexistent is not an sglang tree"),
        (_set("servers.base.model", "/nonexistent"), "/nonexistent holds no config.json"),
        (_set("python", "/nonexistent/python"), "python: /nonexistent/python is not an execut"),
        (_set("servers.spec.draft", "{model}"), "name no DSpark draft (a target directory"),
    ],
)
def test_a_run_checks_its_paths_before_anything_starts(rig, change, fragment):
    data = _real(rig)
    change(data)
    data["servers"]["spec"]["draft"] = data["servers"]["spec"]["draft"].format(model=rig.model)
    path = rig.root / "plan.toml"
    path.write_text(toml(data))
    with pytest.raises(PlanError, match=fragment.replace("(", r"\(")):
        check_paths(load_plan(path, {"TREE": str(rig.tree)}, {}))


def test_the_cli_refuses_a_bad_plan_on_one_line_and_writes_nothing(rig):
    data = _real(rig)
    data["comparisons"]["c"]["expect"] = "same"
    plan = rig.plan(data["servers"], data["comparisons"])
    proc = rig.run(plan)
    assert_refused(proc, "comparisons.c.expect: must be one of identical, diverge")
    assert not rig.out.exists() and rig.events() == []


def test_the_cli_refuses_a_missing_tree_and_writes_nothing(rig):
    data = _real(rig)
    plan = rig.plan(data["servers"], data["comparisons"])
    proc = rig.run(plan, "--set", f"TREE={rig.root / 'nowhere'}")
    assert_refused(proc, "is not an sglang tree (no python/sglang)")
    assert not rig.out.exists() and rig.events() == []


def test_the_cli_refuses_an_out_that_holds_files(rig):
    data = _real(rig)
    plan = rig.plan(data["servers"], data["comparisons"])
    rig.out.mkdir()
    (rig.out / "results.json").write_text("{}")
    proc = rig.run(plan)
    assert_refused(proc, "exists and is not an empty directory")
    assert [p.name for p in rig.out.iterdir()] == ["results.json"] and rig.events() == []


def test_the_documented_example_is_a_plan_and_states_the_defaults(tmp_path):
    """plan.py's EXAMPLE spells out every default: without those lines, the same plan."""
    given = {"SERVER_PYTHON": "python3", "TREE": "/t", "MODEL": "/m", "DRAFT": "/d"}
    written, bare = tmp_path / "written", tmp_path / "bare"
    written.mkdir(), bare.mkdir()
    (written / "plan.toml").write_text(EXAMPLE)
    defaults = re.compile(
        r"^(start_timeout|stop_grace|request_timeout|load_format|cuda_graphs|trace|prompt_len"
        r"|prompt_seed|prompt_vocab|reference) = |^args = \[\] |^env = \{\}$"
    )
    lines = [line for line in EXAMPLE.splitlines() if not defaults.match(line)]
    assert len(EXAMPLE.splitlines()) - len(lines) == 13
    (bare / "plan.toml").write_text("\n".join(lines))
    plan = load_plan(written / "plan.toml", given, {})
    assert dataclasses.replace(plan, path=bare / "plan.toml") == load_plan(
        bare / "plan.toml", given, {}
    )
    assert [s.mode for s in plan.servers.values()] == ["base", "dspark"]


def test_every_unset_variable_is_named_at_once(tmp_path):
    path = tmp_path / "plan.toml"
    path.write_text((PLANS / "reporter-diagnostic.toml").read_text())
    with pytest.raises(PlanError) as refused:
        load_plan(path, {"TREE_0523": "/t"}, {})
    message = str(refused.value)
    for name in ("SERVER_PYTHON", "TREE_SERIES", "MODEL_DIR", "DRAFT"):
        assert f"${{{name}}}" in message and f"--set {name}=..." in message
    assert "TREE_0523" not in message
