"""A cost plan is checked in full before anything starts: one line naming the key, exit 2,
no --out folder. Its servers are server-parity's; its own keys are checked here."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

from gdn_parity.drift.model.config import SIZES
from gdn_parity.drift.modeldir.configs import target_config
from gdn_parity.drift.modeldir.write import ModelDirPlan, write_model_dir
from gdn_parity.realserver.plan import PlanError
from gdn_parity.servercost.plan import EXAMPLE, check_cost_paths, load_cost_plan
from gdn_parity.servercost.schedule import schedule
from helpers.cli import assert_refused
from helpers.server_rig import toml

EXACT = ["--gdn-verify-exact-parity", "--enable-deterministic-inference"]
PLANS = Path(__file__).resolve().parents[2] / "benchmark" / "gpu" / "server" / "plans"


def _good() -> dict:
    server = {"tree": "/t", "model": "/m", "mem_fraction": 0.4, "load_format": "dummy"}
    spec = {**server, "mode": "dspark", "draft": "/d"}
    return {
        "python": "python3",
        "size": "tiny",
        "common": {"args": ["--attention-backend", "triton"]},
        "servers": {
            "base": {**server, "mode": "base"},
            "base-x": {**server, "mode": "base", "args": EXACT},
            "g1": {**spec, "gamma": 1},
            "g3": {**spec, "gamma": 3},
            "g3-x": {**spec, "gamma": 3, "args": EXACT},
        },
        "benchmarks": {
            "b": {"servers": ["base", "base-x", "g1", "g3", "g3-x"], "baseline": "base",
                  "contract": {"base-x": "base", "g3-x": "g3"}, "batches": [1, 4],
                  "prompt_len": 16, "short_tokens": 5, "long_tokens": 29},
        },
    }  # fmt: skip


def _load(tmp_path, data: dict, given: dict | None = None):
    path = tmp_path / "plan.toml"
    path.write_text(toml(data))
    return load_cost_plan(path, given or {}, {})


def test_a_good_plan_reads_as_written(tmp_path):
    plan = _load(tmp_path, _good())
    (b,) = plan.benchmarks
    assert (plan.size, plan.ssm_dtype, plan.kv_cache_dtype) == ("tiny", "float32", "auto")
    assert (b.batches, b.prompt_len, b.short_tokens, b.long_tokens) == ((1, 4), 16, 5, 29)
    assert (b.repeats, b.prompt_seed, b.prompt_vocab, b.accept_lengths) == (3, 0, 248320, None)
    assert dict(b.contract) == {"base-x": "base", "g3-x": "g3"}
    assert plan.servers["g3"].load_format == "dummy"


def test_each_dspark_server_starts_once_per_accept_length(tmp_path):
    starts = [(s.label, s.accept_length) for s in schedule(_load(tmp_path, _good()))]
    assert starts == [
        ("base", None), ("base-x", None), ("g1+acc1", 1), ("g1+acc2", 2), ("g3+acc1", 1),
        ("g3+acc2", 2), ("g3+acc3", 3), ("g3+acc4", 4), ("g3-x+acc1", 1), ("g3-x+acc2", 2),
        ("g3-x+acc3", 3), ("g3-x+acc4", 4),
    ]  # fmt: skip


def test_accept_lengths_keep_to_each_servers_gamma(tmp_path):
    data = _good()
    data["benchmarks"]["b"]["accept_lengths"] = [1, 4]
    starts = [s.label for s in schedule(_load(tmp_path, data))]
    assert starts == ["base", "base-x", "g1+acc1", "g3+acc1", "g3+acc4", "g3-x+acc1", "g3-x+acc4"]


def test_a_start_two_benchmarks_need_runs_both(tmp_path):
    data = _good()
    data["benchmarks"]["c"] = {"servers": ["base", "g1"], "baseline": "base", "batches": [2],
                               "prompt_len": 4, "short_tokens": 3, "long_tokens": 9}  # fmt: skip
    starts = {s.label: s.benchmarks for s in schedule(_load(tmp_path, data))}
    assert starts["base"] == starts["g1+acc2"] == ("b", "c")
    assert starts["g3+acc1"] == ("b",)


def test_variables_are_expanded_in_the_dtypes(tmp_path):
    data = _good() | {"ssm_dtype": "${SSM}", "kv_cache_dtype": "fp8_e4m3"}
    plan = _load(tmp_path, data, {"SSM": "bfloat16"})
    assert (plan.ssm_dtype, plan.kv_cache_dtype) == ("bfloat16", "fp8_e4m3")


def test_the_example_in_the_docstring_is_a_valid_plan(tmp_path):
    path = tmp_path / "example.toml"
    path.write_text(EXAMPLE)
    given = {"SERVER_PYTHON": "python3", "TREE": "/t", "MODEL": "/m", "DRAFT": "/d"}
    plan = load_cost_plan(path, given, {})
    assert [s.label for s in schedule(plan)] == ["base", "base-exact", "dspark-g1+acc1",
                                                 "dspark-g1+acc2"]  # fmt: skip


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


B = "benchmarks.b"
BAD = [
    (_set("size", "70b"), "plan.toml: size: must be one of tiny, large, 27b, 27b-8l"),
    (_set("size", KeyError), "size: is missing"),
    (_set("ssm_dtype", "fp8"), "ssm_dtype: must be one of float32, bfloat16, float16"),
    (_set("kv_cache_dtype", "fp4"), "kv_cache_dtype: must be one of auto, bfloat16"),
    (_set("bogus", 1), "plan.toml: bogus: is not a known key"),
    (_set("comparisons", {}), "plan.toml: comparisons: is not a known key"),
    (_set("benchmarks", {}), "benchmarks: names no benchmark"),
    (_set(f"{B}.batch", [1]), f"{B}.batch: is not a known key"),
    (_set(f"{B}.servers", []), f"{B}.servers: must be a non-empty list of server names"),
    (_set(f"{B}.servers", ["base", "nope"]), f"{B}.servers: names no server ('nope'"),
    (_set(f"{B}.servers", ["base", "base", "base-x", "g1", "g3", "g3-x"]), "names a server twice"),
    (_set(f"{B}.baseline", "g1"), f'{B}.baseline: g1 is mode = "dspark", not "base"'),
    (_set(f"{B}.baseline", "other"), f"{B}.baseline: 'other' is not in {B}.servers"),
    (_set(f"{B}.contract", {"g3-x": "g1"}), f"{B}.contract.g3-x: g3-x is dspark, gamma 3, its "
     "twin g1 is dspark, gamma 1: not a pair"),
    (_set(f"{B}.contract", {"g3": "g3-x"}), f"{B}.contract.g3: g3 lacks --gdn-verify-exact-parity"),
    (_set(f"{B}.contract", {"base": "base"}), "pairs a server with itself"),
    (_set(f"{B}.contract", {"base-x": "nope"}), "'nope' is not in the benchmark's servers"),
    (_set("servers.base-x.args", EXACT[:1]), "base-x lacks --enable-deterministic-inference"),
    (_set("common.args", EXACT[1:]), "base passes --enable-deterministic-inference"),
    (_set(f"{B}.accept_lengths", [5]), f"{B}.accept_lengths: 5 is above every listed server's "
     "gamma + 1 (4)"),
    (_set(f"{B}.accept_lengths", [0]), f"{B}.accept_lengths[0]: must be an integer of at least 1"),
    (_set(f"{B}.accept_lengths", [2, 2]), "names an accept length twice"),
    (_set(f"{B}.long_tokens", 5), f"{B}.long_tokens: must be more than short_tokens (5 <= 5)"),
    (_set(f"{B}.short_tokens", 1), f"{B}.short_tokens: must be an integer of at least 2"),
    (_set(f"{B}.repeats", 0), f"{B}.repeats: must be an integer of at least 1"),
    (_set(f"{B}.prompt_len", KeyError), f"{B}.prompt_len: is missing"),
    (_set(B, _good()["benchmarks"]["b"] | {"prompt_vocab": 3, "prompt_len": 1}),
     f"{B}: prompt_vocab ** prompt_len = 3 distinct prompts, fewer than batch 4"),
    (_set("servers.g1", _good()["servers"]["g1"] | {"trace": True, "cuda_graphs": False}),
     "servers.g1.trace: must be false: a traced server copies its states to the host"),
    (_set("servers.g1.args", ["--kv-cache-dtype", "fp8_e4m3"]),
     "servers.g1.args: --kv-cache-dtype is the cost runner's (set by: kv_cache_dtype)"),
    (_set("common.args", ["--dtype=float16"]), "common.args: --dtype is the cost runner's"),
    (_set("common.args", ["--port", "1"]), "common.args: --port is the runner's to pass"),
    (_set("servers.g1.env", {"SGLANG_SIMULATE_ACC_LEN": "2"}),
     "servers.g1.env.SGLANG_SIMULATE_ACC_LEN: is the cost runner's (set by: accept_lengths)"),
    (_set("common.env", {"SGLANG_MAMBA_SSM_DTYPE": "bfloat16"}), "set by: ssm_dtype"),
    (_set("servers.g1.gamma", KeyError), 'servers.g1.gamma: is missing (mode = "dspark"'),
]  # fmt: skip


@pytest.mark.parametrize(("change", "fragment"), BAD, ids=[f for _, f in BAD])
def test_a_bad_plan_is_refused_naming_the_key(tmp_path, change, fragment):
    data = copy.deepcopy(_good())
    change(data)
    with pytest.raises(PlanError) as caught:
        _load(tmp_path, data)
    assert fragment in str(caught.value)


def test_an_unused_server_is_refused(tmp_path):
    data = _good()
    data["benchmarks"]["b"]["servers"].remove("g1")
    with pytest.raises(PlanError, match="servers.g1: is in no benchmark"):
        _load(tmp_path, data)


def test_accept_lengths_need_a_dspark_server(tmp_path):
    data = _good()
    data["benchmarks"]["b"] |= {"servers": ["base", "base-x"], "contract": {"base-x": "base"},
                                "accept_lengths": [1]}  # fmt: skip
    for name in ("g1", "g3", "g3-x"):
        del data["servers"][name]
    with pytest.raises(PlanError, match="accept_lengths: is for DSpark servers"):
        _load(tmp_path, data)


def test_a_model_of_another_geometry_is_refused(tmp_path, rig):
    plan_data = {
        "python": sys.executable, "size": "tiny",
        "servers": {"base": {"tree": str(rig.tree), "mode": "base", "model": str(rig.model),
                             "mem_fraction": 0.4}},
        "benchmarks": {"b": {"servers": ["base"], "baseline": "base", "batches": [1],
                             "prompt_len": 4, "short_tokens": 3, "long_tokens": 9}},
    }  # fmt: skip
    plan = _load(tmp_path, plan_data)
    config = target_config(SIZES["tiny"])
    (rig.model / "config.json").write_text(json.dumps(config))
    assert check_cost_paths(plan) == rig.python
    (rig.model / "config.json").write_text(json.dumps(config | {"num_hidden_layers": 8}))
    with pytest.raises(PlanError) as caught:
        check_cost_paths(plan)
    assert f"servers.base.model: {rig.model}/config.json has num_hidden_layers = 8, size " in str(
        caught.value
    )
    assert "tiny's is 4" in str(caught.value)


def test_the_cli_refuses_a_bad_plan_on_one_line_and_writes_nothing(rig):
    servers = {"base": rig.server(name="base", mem_fraction=2)}
    benchmarks = {"b": {"servers": ["base"], "baseline": "base", "batches": [1],
                        "prompt_len": 4, "short_tokens": 3, "long_tokens": 9}}  # fmt: skip
    proc = rig.run(rig.cost_plan(servers, benchmarks), verb="server-cost")
    assert_refused(proc, "servers.base.mem_fraction: must be a number between 0 and 1")
    assert not rig.out.exists() and rig.events() == []


def test_the_cli_refuses_a_model_of_another_size_and_writes_nothing(rig):
    servers = {"base": rig.server(name="base")}
    benchmarks = {"b": {"servers": ["base"], "baseline": "base", "batches": [1],
                        "prompt_len": 4, "short_tokens": 3, "long_tokens": 9}}  # fmt: skip
    plan = rig.cost_plan(servers, benchmarks, size="large")
    proc = rig.run(plan, verb="server-cost")
    assert_refused(proc, "config.json has hidden_size = 64, size large's is 1024")
    assert not rig.out.exists() and rig.events() == []


def test_the_cost_plan_accepts_the_model_directory_model_dir_writes(tmp_path, rig):
    written = write_model_dir(ModelDirPlan("27b", tmp_path / "27b", 1, "cpu", weights=False))
    path = PLANS / "cost-27b.toml"
    given = {"SERVER_PYTHON": sys.executable, "TREE_SERIES": str(rig.tree),
             "MODEL_DIR": str(written.target), "DRAFT": str(written.draft),
             "SSM_DTYPE": "float32"}  # fmt: skip
    assert check_cost_paths(load_cost_plan(path, given, {})) == rig.python
