"""gdn-parity server-parity end to end, on fake sglang servers (``helpers.fake_sglang``):
what the servers are started with and in which order, what they are asked, what is
compared, and the exit status."""

from __future__ import annotations

from gdn_parity.debug.issue35150 import INPUT_IDS
from gdn_parity.debug.tokens import ids_sha256
from helpers.cli import is_note
from helpers.fake_sglang import tokens

TOKENS = 12
LIFE = ("start", "healthy", "exit")


def _comparison(base: str, spec: str, batches: list[int], expect: str = "identical") -> dict:
    return {"base": base, "spec": spec, "batches": batches, "max_new_tokens": TOKENS,
            "expect": expect}  # fmt: skip


def test_every_request_is_compared_and_request_5_of_8_diverging_is_caught(rig):
    servers = {
        "base": rig.server(name="base"),
        "spec": rig.server("dspark", 1, name="spec", env={"FAKE_SGLANG_DIVERGE": "c-b8-5@7"}),
    }
    proc = rig.run(rig.plan(servers, {"c": _comparison("base", "spec", [1, 8])}))
    assert proc.returncode == 1, proc.stderr
    assert "| c | base vs spec | 8 | 8 | 7/8 | 7 (request 5) |" in proc.stdout
    (comparison,) = rig.results()["comparisons"]
    assert comparison["verdict"] == "missed"
    batch1, batch8 = comparison["batches"]
    assert (batch1["identical"], batch1["met"]) == (1, True)
    assert (batch8["identical"], batch8["observed"], batch8["met"]) == (7, "diverge", False)
    rows = batch8["requests"]
    assert [r["first_divergence"] for r in rows] == [None] * 5 + [7] + [None] * 2
    # What each server was asked, and what it answers for that prompt.
    asked = {(e["server"], e["rid"]): e["input_ids"] for e in rig.events("request")}
    prompts = [asked["base", f"c-b8-{i}"] for i in range(8)]
    assert prompts[0] == list(INPUT_IDS)
    assert all(len(p) == 24 for p in prompts) and len({tuple(p) for p in prompts}) == 8
    assert all(asked["spec", f"c-b8-{i}"] == prompts[i] for i in range(8))
    assert prompts[:1] == [asked["base", "c-b1-0"]]
    assert [r["base_sha256"] for r in rows] == [ids_sha256(tokens(p, TOKENS)) for p in prompts]
    changed = tokens(prompts[5], TOKENS)
    changed[7] = (changed[7] + 1) % 248320
    assert rows[5]["spec_sha256"] == ids_sha256(changed)
    assert rows[0]["base_distinct"] == len(set(tokens(prompts[0], TOKENS)))
    assert rows[0]["spec_metrics"]["spec_verify_ct"] == TOKENS
    assert rows[0]["spec_completion_tokens"] == rows[0]["base_completion_tokens"] == TOKENS
    assert rig.wait_gone(0) == []


def test_a_batch_is_sent_to_each_server_concurrently(rig):
    env = {"FAKE_SGLANG_GATHER": "8"}  # each request waits until 8 are in flight
    servers = {
        "base": rig.server(name="base", env=env),
        "spec": rig.server("dspark", 1, name="spec", env=env),
    }
    proc = rig.run(rig.plan(servers, {"c": _comparison("base", "spec", [8])}))
    assert proc.returncode == 0, proc.stderr
    requests = rig.events("request")
    assert rig.events("gather-timeout") == []
    for server in ("base", "spec"):
        assert max(e["in_flight"] for e in requests if e["server"] == server) == 8
    # Base's batch is done before the speculative server gets a request.
    last_base = max(i for i, e in enumerate(requests) if e["server"] == "base")
    assert all(e["server"] == "spec" for e in requests[last_base + 1 :])
    assert len(requests) == 16


def test_a_batch_above_a_servers_limit_says_how_many_ran_at_once(rig):
    # A real DSpark server with an fp32 SSM pool capped itself at 35 requests, and a "batch
    # 64" row then hid that 29 requests queued. The row names the limit and whose it is.
    servers = {
        "base": rig.server(name="base", env={"FAKE_SGLANG_MAX_RUNNING": "6"}),
        "spec": rig.server("dspark", 1, name="spec", env={"FAKE_SGLANG_MAX_RUNNING": "3"}),
    }
    proc = rig.run(rig.plan(servers, {"c": _comparison("base", "spec", [2, 4, 8])}))
    assert proc.returncode == 0, proc.stderr
    assert "| c | base vs spec | 2 | 2 | 2/2 |" in proc.stdout
    assert "| c | base vs spec | 4 | 3 (spec's limit) | 4/4 |" in proc.stdout
    assert "| c | base vs spec | 8 | 3 (spec's limit) | 8/8 |" in proc.stdout
    batches = rig.results()["comparisons"][0]["batches"]
    assert [(b["at_once"], b["limited_by"]) for b in batches] == [
        (2, None), (3, "spec"), (3, "spec")
    ]  # fmt: skip
    note = "c, batch 4: spec can run at most 3 requests at once; the rest queue"
    assert f"gdn-parity server-parity: {note}" in proc.stderr.splitlines()
    starts = {s["label"]: s["capacity"] for s in rig.results()["servers"]}
    assert starts["base"]["max_running_requests"] == 6
    assert starts["spec"]["max_running_requests"] == 3


def test_a_kv_pool_too_small_for_the_batch_limits_it_too(rig):
    # 24 prompt + 12 output tokens + 2 verify rows = 38 a request: 100 tokens hold 2.
    servers = {
        "base": rig.server(name="base"),
        "spec": rig.server("dspark", 1, name="spec", env={"FAKE_SGLANG_TOKEN_CAPACITY": "100"}),
    }
    proc = rig.run(rig.plan(servers, {"c": _comparison("base", "spec", [2, 4])}))
    assert proc.returncode == 0, proc.stderr
    assert "| c | base vs spec | 2 | 2 | 2/2 |" in proc.stdout
    assert "| c | base vs spec | 4 | 2 (spec's limit) | 4/4 |" in proc.stdout


def test_a_server_that_does_not_say_its_limit_leaves_at_once_unknown(rig):
    servers = {
        "base": rig.server(name="base"),
        # /server_info fails on a value the fake cannot parse: no internal state comes back.
        "spec": rig.server("dspark", 1, name="spec", env={"FAKE_SGLANG_MAX_RUNNING": "many"}),
    }
    proc = rig.run(rig.plan(servers, {"c": _comparison("base", "spec", [2])}))
    assert proc.returncode == 0, proc.stderr
    assert "| c | base vs spec | 2 | unknown | 2/2 |" in proc.stdout
    assert any("spec: how many requests it runs at once is unknown" in line
               for line in proc.stderr.splitlines())  # fmt: skip
    (batch,) = rig.results()["comparisons"][0]["batches"]
    assert (batch["at_once"], batch["limited_by"]) == (None, None)


def _alone(server: str, batches: list[int]) -> dict:
    return _comparison(server, server, batches) | {"reference": "alone"}


def test_a_server_against_itself_alone_catches_a_request_that_depends_on_its_batch(rig):
    env = {"FAKE_SGLANG_BATCH_DIVERGE": "c-b4-2@5", "FAKE_SGLANG_HOLD": "0.2"}
    servers = {"s": rig.server("dspark", 3, name="s", env=env)}
    proc = rig.run(rig.plan(servers, {"c": _alone("s", [4])}))
    assert proc.returncode == 1, proc.stderr
    assert "| c | s alone vs s | 4 | 4 | 3/4 | 5 (request 2) |" in proc.stdout
    events = [(e["event"], e["server"]) for e in rig.events() if e["event"] in LIFE]
    assert events == [("start", "s"), ("healthy", "s"), ("exit", "s")]  # started once
    served = [
        (e["event"], e.get("rid"), e["in_flight"] if e["event"] == "request" else None)
        for e in rig.events()
        if e["event"] in ("flush", "request")
    ]
    alone = [("flush", None, None), *[("request", f"c-b4-{i}", 1) for i in range(4)]]
    # Each request alone after a flush, then the batch after one more.
    assert served[:8] == [x for i in range(4) for x in (alone[0], alone[1 + i])]
    assert served[8] == ("flush", None, None)
    assert sorted(r for _, r, _ in served[9:]) == [f"c-b4-{i}" for i in range(4)]
    assert max(n for _, _, n in served[9:]) > 1  # the batch ran together
    (comparison,) = rig.results()["comparisons"]
    assert comparison["reference"] == "alone"


def test_a_batch_invariant_server_against_itself_alone_is_identical(rig):
    servers = {"s": rig.server("dspark", 3, name="s", env={"FAKE_SGLANG_HOLD": "0.2"})}
    proc = rig.run(rig.plan(servers, {"c": _alone("s", [1, 4])}))
    assert proc.returncode == 0, proc.stderr
    assert "| c | s alone vs s | 4 | 4 | 4/4 | none |" in proc.stdout


def test_alone_against_another_server_counts_only_the_batchs_limits(rig):
    servers = {
        "b": rig.server(name="b", env={"FAKE_SGLANG_MAX_RUNNING": "1"}),
        "s": rig.server("dspark", 1, name="s"),
    }
    comparison = _comparison("b", "s", [4]) | {"reference": "alone"}
    proc = rig.run(rig.plan(servers, {"c": comparison}))
    assert proc.returncode == 0, proc.stderr
    # b runs one at a time by its limit, which is all "alone" asks of it.
    assert "| c | b alone vs s | 4 | 4 | 4/4 | none |" in proc.stdout
    events = [(e["event"], e["server"]) for e in rig.events() if e["event"] in LIFE]
    assert events == [
        ("start", "b"), ("healthy", "b"), ("start", "s"), ("healthy", "s"),
        ("exit", "s"), ("exit", "b"),
    ]  # fmt: skip
    in_flight = [(e["server"], e["in_flight"]) for e in rig.events("request")]
    assert [n for server, n in in_flight if server == "b"] == [1, 1, 1, 1]


def test_servers_start_one_at_a_time_and_a_base_is_reused(rig):
    servers = {
        "b1": rig.server(name="b1"),
        "b2": rig.server(name="b2"),
        "s1": rig.server("dspark", 1, name="s1"),
        "s3": rig.server("dspark", 3, name="s3"),
    }
    comparisons = {
        "one": _comparison("b1", "s1", [1]),
        "two": _comparison("b2", "s1", [2]),
        "three": _comparison("b1", "s3", [1]),
    }
    proc = rig.run(rig.plan(servers, comparisons))
    assert proc.returncode == 0, proc.stderr
    events = [(e["event"], e["server"]) for e in rig.events() if e["event"] in LIFE]
    assert events == [
        ("start", "b1"), ("healthy", "b1"),
        ("start", "s1"), ("healthy", "s1"), ("exit", "s1"),
        ("start", "s3"), ("healthy", "s3"), ("exit", "s3"),
        ("exit", "b1"),
        ("start", "b2"), ("healthy", "b2"),
        ("start", "s1"), ("healthy", "s1"), ("exit", "s1"),
        ("exit", "b2"),
    ]  # fmt: skip
    # Each comparison's requests went to its own pair.
    asked = {(e["server"], e["rid"]) for e in rig.events("request")}
    assert asked == {("b1", "one-b1-0"), ("s1", "one-b1-0"), ("b1", "three-b1-0"),
                     ("s3", "three-b1-0"), ("b2", "two-b2-0"), ("s1", "two-b2-0"),
                     ("b2", "two-b2-1"), ("s1", "two-b2-1")}  # fmt: skip
    # Each server's cache is flushed right before it gets a batch: what Base cached for an
    # earlier comparison is gone when the next one starts.
    served = [
        (e["event"], e["server"], e.get("rid", "")[:-2])
        for e in rig.events()
        if e["event"] in ("flush", "request") and e["server"] in ("b2", "s1")
    ]
    assert served == [
        ("flush", "s1", ""), ("request", "s1", "one-b1"),
        ("flush", "b2", ""), ("request", "b2", "two-b2"), ("request", "b2", "two-b2"),
        ("flush", "s1", ""), ("request", "s1", "two-b2"), ("request", "s1", "two-b2"),
    ]  # fmt: skip
    labels = [s["label"] for s in rig.results()["servers"]]
    assert labels == ["b1", "s1", "s3", "b2", "s1-2"]
    assert (rig.out / "logs" / "s1-2.log").is_file()


def test_the_command_line_and_environment_of_a_speculative_server(rig):
    servers = {
        "base": rig.server(name="base"),
        "spec": rig.server(
            "dspark", 3, name="spec", cuda_graphs=False, args=["--own", "x"], env={"B": "2"}
        ),
    }
    plan = rig.plan(
        servers,
        {"c": _comparison("base", "spec", [1])},
        common={"args": ["--attention-backend", "triton"], "env": {"A": "1"}},
    )
    proc = rig.run(plan)
    assert proc.returncode == 0, proc.stderr
    start = rig.events("start")[1]
    port = start["argv"][start["argv"].index("--port") + 1]
    assert start["argv"] == [
        "--model-path", str(rig.model), "--load-format", "auto", "--skip-tokenizer-init",
        "--host", "127.0.0.1", "--port", port, "--random-seed", "0",
        "--mem-fraction-static", "0.4", "--disable-cuda-graph",
        "--speculative-algorithm", "DSPARK", "--speculative-draft-model-path",
        str(rig.draft(3)), "--speculative-dspark-block-size", "3",
        "--speculative-draft-load-format", "dummy",
        "--attention-backend", "triton", "--own", "x",
    ]  # fmt: skip
    assert start["env"]["PYTHONPATH"].split(":")[0] == str(rig.tree / "python")
    assert start["cwd"] == str(rig.out)
    assert "fake sglang: loading step 49" in (rig.out / "logs" / "spec.log").read_text()
    server = rig.results()["servers"][1]
    assert (server["env"]["A"], server["env"]["B"]) == ("1", "2")
    assert server["argv"][3:] == ["--model-path", *start["argv"][1:]]


def test_a_negative_control_must_diverge(rig):
    diverging = {"FAKE_SGLANG_DIVERGE": "control-b1-0@3"}
    servers = {
        "base": rig.server(name="base"),
        "old": rig.server("dspark", 1, name="old", env=diverging),
        "new": rig.server("dspark", 1, name="new"),
    }
    comparisons = {
        "control": _comparison("base", "old", [1], expect="diverge"),
        "series": _comparison("base", "new", [1]),
    }
    proc = rig.run(rig.plan(servers, comparisons))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "| control | base vs old | 1 | 1 | 0/1 | 3 (request 0) |" in proc.stdout
    assert "diverge | diverge: met |" in proc.stdout
    # The same control against a server that does not diverge fails the run.
    rig.out = rig.root / "out2"
    comparisons["control"]["spec"] = "new"
    del servers["old"]
    proc = rig.run(rig.plan(servers, comparisons))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "| diverge | identical: MISSED |" in proc.stdout


def test_a_server_that_fails_at_start_is_reported_with_its_log_tail(rig):
    servers = {
        "broken": rig.server(name="broken", env={"FAKE_SGLANG_FAIL": "1"}),
        "spec": rig.server("dspark", 1, name="spec"),
        "good": rig.server(name="good"),
    }
    comparisons = {
        "first": _comparison("broken", "spec", [1]),
        "second": _comparison("good", "spec", [1]),
    }
    proc = rig.run(rig.plan(servers, comparisons))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    *notes, error = proc.stderr.splitlines()
    assert all(is_note(line, "server-parity") for line in notes), proc.stderr
    assert error.startswith("gdn-parity server-parity: error: server broken exited with status 3")
    assert str(rig.out / "logs" / "broken.log") in error
    tail = [n.split("broken log: ", 1)[1] for n in notes if "broken log: " in n]
    assert len(tail) == 40 and tail[-1] == "RuntimeError: fake start failure"
    assert tail[0] == "fake sglang: loading step 11"
    # The speculative server was not started for the broken Base, and was for the good one.
    assert [(e["server"]) for e in rig.events("start")] == ["broken", "good", "spec"]
    results = rig.results()
    first, second = results["comparisons"]
    assert "server broken exited with status 3" in first["not_run"]
    assert (first["verdict"], first["batches"]) == ("not run", [])
    assert (second["verdict"], second["batches"][0]["met"]) == ("met", True)
    assert results["servers"][0]["log_tail"] == tail
    md = (rig.out / "results.md").read_text()
    assert "RuntimeError: fake start failure" in md and "not run: server broken" in md
    assert "Every step ran, but broken failed (see Server starts)." in md
    assert rig.wait_gone(0) == []


def test_a_server_that_never_answers_is_stopped_at_its_limit(rig):
    servers = {
        "base": rig.server(name="base", env={"FAKE_SGLANG_NEVER_HEALTHY": "1"}, start_timeout=1),
        "spec": rig.server("dspark", 1, name="spec"),
    }
    proc = rig.run(rig.plan(servers, {"c": _comparison("base", "spec", [1])}))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "server base did not answer GET /health_generate with 200 within 1 s" in proc.stderr
    assert "base log: fake sglang: loading step 49" in proc.stderr
    assert [e["server"] for e in rig.events("start")] == ["base"]
    assert rig.results()["servers"][0]["stopped"] == "SIGTERM"
    assert rig.wait_gone(0) == []


def test_a_server_that_ignores_sigterm_is_killed_after_the_grace(rig):
    servers = {
        "base": rig.server(name="base", env={"FAKE_SGLANG_IGNORE_SIGTERM": "1"}),
        "spec": rig.server("dspark", 1, name="spec"),
    }
    plan = rig.plan(servers, {"c": _comparison("base", "spec", [1])}, stop_grace=0.5)
    proc = rig.run(plan)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    base, spec = rig.results()["servers"]
    assert (base["stopped"], base["leftover"]) == ("SIGKILL after 0.5 s", [])
    assert spec["stopped"] == "SIGTERM"
    assert rig.wait_gone(0) == []
