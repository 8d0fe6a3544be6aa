"""gdn-parity server-cost end to end, on fake sglang servers (``helpers.fake_sglang``) whose
meta_info reports P ms of prefill and S ms a step: what is started, in which order, what is
sent, and the table the times give."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.cli import sigint_as_a_terminal

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "python"  # where the tests import from

EXACT = ["--gdn-verify-exact-parity", "--enable-deterministic-inference"]
LIFE = ("probe", "start", "healthy", "exit")


def _rows(table: str, batch: str) -> list[str]:
    """The table's rows at ``batch`` (its fourth column)."""
    return [
        line
        for line in table.splitlines()
        if line.startswith("| ") and line.split(" | ")[3:4] == [batch]
    ]


def _server(rig, mode: str, name: str, step_ms: float, gamma: int = 1, **keys) -> dict:
    env = {"FAKE_SGLANG_STEP_MS": f"300,{step_ms}", **keys.pop("env", {})}
    return rig.server(mode, gamma, name=name, env=env, **keys)


def _plan(rig, batches: list[int] = [1, 3], top: dict | None = None, **servers_env):  # noqa: B006
    servers = {
        "base": _server(rig, "base", "base", 10),
        "base-x": _server(rig, "base", "base-x", 12, args=EXACT),
        "g1": _server(rig, "dspark", "g1", 15),
        "g1-x": _server(rig, "dspark", "g1-x", 16, args=EXACT),
    }
    for name, env in servers_env.items():
        servers[name]["env"] |= env
    benchmarks = {
        "b": {"servers": ["base", "base-x", "g1", "g1-x"], "baseline": "base",
              "contract": {"base-x": "base", "g1-x": "g1"}, "batches": batches,
              "prompt_len": 8, "short_tokens": 5, "long_tokens": 29, "repeats": 3},
    }  # fmt: skip
    return rig.cost_plan(servers, benchmarks, **(top or {}))


def test_the_table_of_four_servers_at_each_accept_length(rig):
    rig.cost_python(2e12)
    proc = rig.run(_plan(rig), verb="server-cost")
    assert proc.returncode == 0, proc.stderr
    table = (rig.out / "results.md").read_text()
    # 24 more tokens a request between the runs (5 then 29). Base: 24 steps of 10 ms, 10 ms a
    # token. DSpark at accept length 2: 12 verifies of 15 ms for 24 tokens, 7.5 ms a token.
    # Floor at batch 1: the tiny model's 32,059,704 bytes of weights, its states (3 GDN layers
    # x 2,432 bytes, read and written once) and KV (128 bytes a token, 8 + 17 + 1 tokens) over
    # 2e12 bytes/s: 0.0160 ms a step; verify's 2 rows: 21,888 bytes of state, 3,456 of KV.
    expected = [
        "| base | - | 1 (1.00) | 1 | 10.00 [10.00-10.00] | 10.00 [10.00-10.00] | 0.02 | 0.02 "
        "| 1.000 | - |",
        "| base-x | - | 1 (1.00) | 1 | 12.00 [12.00-12.00] | 12.00 [12.00-12.00] | 0.02 | 0.02 "
        "| 1.200 | 1.200 |",
        "| g1 | 1 | 1 (1.00) | 1 | 15.00 [15.00-15.00] | 15.00 [15.00-15.00] | 0.02 | 0.02 "
        "| 1.500 | - |",
        "| g1 | 1 | 2 (2.00) | 1 | 7.50 [7.50-7.50] | 15.00 [15.00-15.00] | 0.02 | 0.01 "
        "| 0.750 | - |",
        "| g1-x | 1 | 1 (1.00) | 1 | 16.00 [16.00-16.00] | 16.00 [16.00-16.00] | 0.02 | 0.02 "
        "| 1.600 | 1.067 |",
        "| g1-x | 1 | 2 (2.00) | 1 | 8.00 [8.00-8.00] | 16.00 [16.00-16.00] | 0.02 | 0.01 "
        "| 0.800 | 1.067 |",
    ]
    assert _rows(table, "1") == expected
    assert [row.split(" | ")[4:6] for row in _rows(table, "3")] == [
        ["10.00 [10.00-10.00]", "10.00 [10.00-10.00]"],
        ["12.00 [12.00-12.00]", "12.00 [12.00-12.00]"],
        ["15.00 [15.00-15.00]", "15.00 [15.00-15.00]"],
        ["7.50 [7.50-7.50]", "15.00 [15.00-15.00]"],
        ["16.00 [16.00-16.00]", "16.00 [16.00-16.00]"],
        ["8.00 [8.00-8.00]", "16.00 [16.00-16.00]"],
    ]
    results = json.loads((rig.out / "results.json").read_text())
    base_floor = next(r["floor"] for r in results["rows"] if r["server"] == "base")
    assert base_floor["weights"] + base_floor["state"] + base_floor["kv"] == (
        32_059_704 + 3 * 2_432 * 2 + 128 * (8 + 17 + 1)
    )
    assert base_floor["step_ms"] == pytest.approx(32_077_624 / 2e12 * 1e3)
    g1 = next(r for r in results["rows"] if r["server"] == "g1" and r["accept_length"] == 2)
    assert (g1["floor"]["state"], g1["floor"]["kv"], g1["floor"]["width"]) == (21_888, 3_456, 2)
    assert g1["floor"]["token_ms"] == pytest.approx(g1["floor"]["step_ms"] / 2)
    assert [s["bandwidth"] for s in results["starts"]] == [
        {"bytes_per_s": 2e12, "device": "fake GPU", "software": "torch 0"}
    ] * 6
    assert results["complete"] and all(c["not_run"] is None for c in results["cells"])
    assert f"wrote {rig.out}/results.md" in proc.stdout
    assert rig.wait_gone(0) == []


def test_one_server_at_a_time_each_after_its_probe(rig):
    rig.cost_python(2e12)
    assert rig.run(_plan(rig, [2]), verb="server-cost").returncode == 0
    life = [(e["event"], e["server"]) for e in rig.events() if e["event"] in LIFE]
    names = ["base", "base-x", "g1", "g1", "g1-x", "g1-x"]
    assert life == [(event, n) for n in names for event in LIFE]
    starts = rig.events("start")
    accept = [e["env"].get("SGLANG_SIMULATE_ACC_LEN") for e in starts]
    assert accept == [None, None, "1", "2", "1", "2"]
    assert all(
        e["env"].get("SGLANG_SIMULATE_ACC_TOKEN_MODE") == ("real-draft-token" if k else None)
        for e, k in zip(starts, accept, strict=True)
    )
    assert all(e["argv"][-4:] == ["--mamba-ssm-dtype", "float32", "--kv-cache-dtype", "auto"]
               for e in starts)  # fmt: skip
    assert [(e["argv"].count(EXACT[0]), e["argv"].count(EXACT[1])) for e in starts] == [
        (0, 0), (1, 1), (0, 0), (0, 0), (1, 1), (1, 1)
    ]  # fmt: skip
    # The probe runs in the server's environment, with this package importable.
    probe = rig.events("probe")[0]
    assert probe["pythonpath"].startswith(f"{rig.tree}/python:")
    assert probe["pythonpath"].endswith(f":{PACKAGE_ROOT}")


def test_each_batch_is_a_warm_up_then_short_and_long_runs_in_turn_each_after_a_flush(rig):
    rig.cost_python(2e12)
    env = {"FAKE_SGLANG_GATHER": "3"}  # each request waits until 3 are in flight
    plan = _plan(rig, [3], base=env)
    assert rig.run(plan, verb="server-cost").returncode == 0
    served = [e for e in rig.events() if e["server"] == "base" and e["event"] in
              ("flush", "request")]  # fmt: skip
    runs = [served[i : i + 4] for i in range(0, len(served), 4)]
    assert [[e["event"] for e in run] for run in runs] == [["flush"] + ["request"] * 3] * 7
    assert {run[0]["query"] for run in runs} == {"timeout=30"}  # sglang waits for idle
    assert [{e["max_new_tokens"] for e in run[1:]} for run in runs] == [
        {5}, {5}, {29}, {29}, {5}, {5}, {29}
    ]  # fmt: skip
    names = ["warmup", "r0-short", "r0-long", "r1-long", "r1-short", "r2-short", "r2-long"]
    assert [sorted(e["rid"] for e in run[1:]) for run in runs] == [
        [f"b-b3-{name}-{i}" for i in range(3)] for name in names
    ]
    assert rig.events("gather-timeout") == []
    assert max(e["in_flight"] for e in served if e["event"] == "request") == 3
    prompts = {tuple(e["input_ids"]) for e in served if e["event"] == "request"}
    assert len(prompts) == 3 and all(len(p) == 8 for p in prompts)


def test_a_server_that_fails_to_start_is_reported_and_the_rest_run(rig):
    rig.cost_python(2e12)
    plan = _plan(rig, [1], **{"base-x": {"FAKE_SGLANG_FAIL": "1"}})
    proc = rig.run(plan, verb="server-cost")
    assert proc.returncode == 2, proc.stderr
    assert "server base-x exited with status 3 before it answered" in proc.stderr
    assert "base-x log: RuntimeError: fake start failure" in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith(
        "gdn-parity server-cost: error: server base-x did not serve (1 start(s) failed); the "
        f"results so far: {rig.out}/results.md"
    )
    results = json.loads((rig.out / "results.json").read_text())
    (failed,) = [s for s in results["starts"] if s["server"]["failure"]]
    assert failed["server"]["label"] == "base-x"
    assert failed["server"]["log_tail"][-1] == "RuntimeError: fake start failure"
    assert [c["not_run"] is None for c in results["cells"]] == [True, False, True, True, True, True]
    rows = {(r["server"], r["accept_length"]): r for r in results["rows"]}
    assert ("base-x", None) not in rows and rows["g1-x", 1]["vs_twin"] == pytest.approx(16 / 15)
    assert (
        "- base-x, batch 1: the server did not start: server base-x exited"
        in (rig.out / "results.md").read_text()
    )
    assert rig.wait_gone(0) == []


def test_a_batch_above_what_the_server_runs_at_once_is_not_sent(rig):
    rig.cost_python(2e12)
    plan = _plan(rig, [1, 3], g1={"FAKE_SGLANG_MAX_RUNNING": "2"})
    proc = rig.run(plan, verb="server-cost")
    assert proc.returncode == 2
    assert "the server runs at most 2 requests at once" in proc.stderr.splitlines()[-1]
    g1 = {e["rid"].split("-")[1] for e in rig.events("request") if e["server"] == "g1"}
    base = {e["rid"].split("-")[1] for e in rig.events("request") if e["server"] == "base"}
    assert (g1, base) == ({"b1"}, {"b1", "b3"})
    table = (rig.out / "results.md").read_text()
    assert "- g1+acc2, batch 3: the server runs at most 2 requests at once" in table


def test_without_a_bandwidth_the_times_stand_and_the_floor_is_missing(rig):
    rig.cost_python(None)
    proc = rig.run(_plan(rig, [1]), verb="server-cost")
    assert proc.returncode == 2
    assert "no copy bandwidth before base, so no floor: " in proc.stderr.splitlines()[-1]
    assert "copyprobe: torch sees no CUDA device" in proc.stderr.splitlines()[-1]
    table = (rig.out / "results.md").read_text()
    assert (
        "| base | - | 1 (1.00) | 1 | 10.00 [10.00-10.00] | 10.00 [10.00-10.00] | n/a | n/a "
        in table
    )


def test_retracted_requests_are_named_under_the_table(rig):
    rig.cost_python(2e12)
    plan = _plan(rig, [1], g1={"FAKE_SGLANG_RETRACT": "b-b1-r1-long-0"})
    assert rig.run(plan, verb="server-cost").returncode == 0
    table = (rig.out / "results.md").read_text()
    named = "Requests were retracted (the KV pool ran out) in: g1 at 1 batch 1 (1), g1 at 2 "
    assert named + "batch 1 (1). Those times include the recomputation." in table


@pytest.mark.skipif(
    subprocess.run([sys.executable, "-c", "import torch, sys; sys.exit(torch.cuda.is_available())"]
                   ).returncode != 0,
    reason="a CUDA device: the probe measures it",
)  # fmt: skip
def test_the_probe_refuses_a_machine_without_cuda():
    proc = subprocess.run(
        [sys.executable, "-m", "gdn_parity.servercost.copyprobe"], capture_output=True, text=True
    )
    assert (proc.returncode, proc.stdout) == (1, "")
    assert (
        proc.stderr == "copyprobe: torch sees no CUDA device (the floor's bandwidth is a GPU's)\n"
    )


def _starts_run(rig) -> list[str]:
    return [e["server"] for e in rig.events("start")]


def _resumed(rig, plan, *extra: str) -> subprocess.CompletedProcess:
    """``plan`` resumed in the rig's ``--out``, its servers' records cleared first."""
    (rig.records / "events.jsonl").unlink(missing_ok=True)
    return rig.run(plan, "--resume", *extra, verb="server-cost")


def test_resume_runs_again_only_a_failed_or_changed_start_and_renders_one_table(rig):
    rig.cost_python(2e12)
    first = rig.run(_plan(rig, [1], **{"base-x": {"FAKE_SGLANG_FAIL": "1"}}), verb="server-cost")
    assert first.returncode == 2, first.stderr
    assert _starts_run(rig) == ["base", "base-x", "g1", "g1", "g1-x", "g1-x"]
    # base-x now starts; g1-x's steps take 17 ms, not 16: a change to what that server runs.
    # A longer request timeout changes nothing a start measures.
    plan = _plan(rig, [1], {"request_timeout": 999}, **{"g1-x": {"FAKE_SGLANG_STEP_MS": "300,17"}})
    proc = _resumed(rig, plan)
    assert proc.returncode == 0, proc.stderr
    assert _starts_run(rig) == ["base-x", "g1-x", "g1-x"]
    results = rig.results()
    assert [s["server"]["label"] for s in results["starts"]] == [
        "base", "base-x", "g1+acc1", "g1+acc2", "g1-x+acc1", "g1-x+acc2"
    ]  # fmt: skip
    assert [c["start"] for c in results["cells"]] == [
        s["server"]["label"] for s in results["starts"]
    ]
    assert results["complete"] and all(c["measured"] for c in results["cells"])
    assert "resumed: 3 of 6 starts kept from the earlier run" in results["events"]
    assert "run again base-x: it failed" in results["events"]
    assert "run again g1-x+acc1: the plan changed what it runs" in results["events"]
    rows = {(r["server"], r["accept_length"]): r for r in results["rows"]}
    assert rows["base", None]["measured"]["tpot_ms"]["median"] == pytest.approx(10.0)  # kept
    assert rows["base-x", None]["vs_baseline"] == pytest.approx(1.2)  # run now, beside kept
    assert rows["g1-x", 2]["measured"]["step_ms"]["median"] == pytest.approx(17.0)
    assert rows["g1-x", 2]["vs_twin"] == pytest.approx(17 / 15)
    table = (rig.out / "results.md").read_text()
    assert "| base | - | 1 (1.00) | 1 | 10.00 [10.00-10.00] |" in table
    assert "| g1-x | 1 | 2 (2.00) | 1 | 8.50 [8.50-8.50] | 17.00 [17.00-17.00] |" in table
    # The failed attempt's log is set aside, not appended to.
    assert "RuntimeError: fake start failure" in (rig.out / "logs" / "base-x.1.log").read_text()
    assert "fake start failure" not in (rig.out / "logs" / "base-x.log").read_text()
    assert rig.wait_gone(0) == []


def test_resume_of_a_complete_run_starts_nothing(rig):
    rig.cost_python(2e12)
    plan = _plan(rig, [1])
    assert rig.run(plan, verb="server-cost").returncode == 0
    before = rig.results()
    dry = _resumed(rig, plan, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert "6 starts (6 kept from the earlier run)" in lines[0]
    assert lines[3].startswith("1. kept base (base): the earlier run timed it (it runs again if ")
    assert lines[-1] == "in all: 0 requests, 0 prompt tokens prefilled, 0 new tokens"
    proc = _resumed(rig, plan)
    assert proc.returncode == 0, proc.stderr
    assert [e["event"] for e in rig.events()] == ["probe"]  # the GPU's check, no server
    after = rig.results()
    assert (after["starts"], after["cells"], after["rows"]) == (
        before["starts"], before["cells"], before["rows"]
    )  # fmt: skip
    assert after["events"][: len(before["events"])] == before["events"]
    assert after["events"][len(before["events"]) :] == [
        "resumed: 6 of 6 starts kept from the earlier run"
    ]


def test_resume_on_another_gpu_runs_every_start_again(rig):
    rig.cost_python(2e12, device="GPU A")
    plan = _plan(rig, [1])
    assert rig.run(plan, verb="server-cost").returncode == 0
    rig.cost_python(3e12, device="GPU B")
    proc = _resumed(rig, plan)
    assert proc.returncode == 0, proc.stderr
    assert _starts_run(rig) == ["base", "base-x", "g1", "g1", "g1-x", "g1-x"]
    results = rig.results()
    assert (
        "run again base: it ran on GPU A (torch 0), this machine has GPU B (torch 0)"
        in results["events"]
    )
    assert {s["bandwidth"]["device"] for s in results["starts"]} == {"GPU B"}


def test_resume_runs_again_what_was_not_timed_and_drops_what_the_plan_left(rig):
    rig.cost_python(None)  # no bandwidth: the first run's starts have no floor
    first = rig.run(_plan(rig, [1], g1={"FAKE_SGLANG_MAX_RUNNING": "0"}), verb="server-cost")
    assert first.returncode == 2
    rig.cost_python(2e12)
    assert _resumed(rig, _plan(rig, [1], g1={"FAKE_SGLANG_MAX_RUNNING": "0"})).returncode == 2
    events = rig.results()["events"]
    assert "run again base: it has no copy bandwidth" in events
    # g1 ran every batch but sent none (it runs no request at once): run again, not kept.
    plan = rig.cost_plan(*_without_g1x(rig))
    proc = _resumed(rig, plan)
    assert proc.returncode == 0, proc.stderr
    assert _starts_run(rig) == ["g1", "g1"]
    events = rig.results()["events"]
    assert "run again g1+acc1: not every batch was timed" in events
    assert "run again g1-x+acc1: the plan no longer runs it" in events
    assert [s["server"]["label"] for s in rig.results()["starts"]] == [
        "base", "base-x", "g1+acc1", "g1+acc2"
    ]  # fmt: skip


def _without_g1x(rig) -> tuple[dict, dict]:
    servers = {
        "base": _server(rig, "base", "base", 10),
        "base-x": _server(rig, "base", "base-x", 12, args=EXACT),
        "g1": _server(rig, "dspark", "g1", 15),
    }
    benchmarks = {
        "b": {"servers": ["base", "base-x", "g1"], "baseline": "base",
              "contract": {"base-x": "base"}, "batches": [1], "prompt_len": 8,
              "short_tokens": 5, "long_tokens": 29, "repeats": 3},
    }  # fmt: skip
    return servers, benchmarks


def test_an_interrupted_resume_keeps_the_starts_it_had_not_reached(rig):
    rig.cost_python(2e12)
    assert rig.run(_plan(rig, [1]), verb="server-cost").returncode == 0
    (rig.records / "events.jsonl").unlink()
    # base changes and holds its requests: the resume is interrupted while it times base.
    plan = _plan(rig, [1], base={"FAKE_SGLANG_HOLD": "60"})
    runner = subprocess.Popen(
        rig.args(plan, "--resume", verb="server-cost"), env=rig.env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=sigint_as_a_terminal,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not rig.events("request") and time.monotonic() < deadline:
        time.sleep(0.05)
    runner.send_signal(signal.SIGINT)
    runner.communicate(timeout=60)
    results = rig.results()
    assert results["interrupted"] == "interrupted (SIGINT or SIGTERM)"
    assert [s["server"]["label"] for s in results["starts"]] == [
        "base", "base-x", "g1+acc1", "g1+acc2", "g1-x+acc1", "g1-x+acc2"
    ]  # fmt: skip
    measured = {c["start"]: c["measured"] is not None for c in results["cells"]}
    assert measured == {"base": False, "base-x": True, "g1+acc1": True, "g1+acc2": True,
                        "g1-x+acc1": True, "g1-x+acc2": True}  # fmt: skip
    assert rig.wait_gone() == []


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "--resume: cannot read {out}/results.json (No such file or directory)"),
        ("{", "--resume: {out}/results.json is not a server-cost results.json: Expecting"),
        (b"\xff\xfe", "is not a server-cost results.json: not UTF-8"),
        ('{"plan": "p", "out": "o", "rows": [], "mode": 1}',
         "is not a server-cost results.json: results: unknown field 'mode'"),
        ('{"plan": "p", "out": "o", "starts": [{"name": 3}]}',
         "is not a server-cost results.json: results.starts[0].name: expected str, got int"),
        ('{"plan": "p", "out": "o", "starts": [{"name": "base"}]}',
         "is not a server-cost results.json: results.starts[0]: missing field 'server'"),
        ("twice", "is not a server-cost results.json: start base is in it twice"),
    ],
)  # fmt: skip
def test_resume_refuses_an_out_without_a_cost_runs_results(rig, content, message):
    rig.cost_python(2e12)
    plan = _plan(rig, [1])
    if content == "twice":
        assert rig.run(plan, verb="server-cost").returncode == 0
        results = rig.results()
        results["starts"].append(results["starts"][0])
        content = json.dumps(results)
    rig.out.mkdir(exist_ok=True)
    if isinstance(content, bytes):
        (rig.out / "results.json").write_bytes(content)
    elif content is not None:
        (rig.out / "results.json").write_text(content)
    before = {p.name: p.read_bytes() for p in rig.out.rglob("*") if p.is_file()}
    (rig.records / "events.jsonl").unlink(missing_ok=True)
    proc = rig.run(plan, "--resume", verb="server-cost")
    assert proc.returncode == 2
    assert len(proc.stderr.splitlines()) == 1
    assert message.format(out=rig.out) in proc.stderr
    assert {p.name: p.read_bytes() for p in rig.out.rglob("*") if p.is_file()} == before
    assert rig.events() == []
