"""--dry-run prints the schedule with every command line and environment, and starts nothing."""

from __future__ import annotations

import os
import sys


def test_a_dry_run_prints_the_schedule_and_starts_nothing(rig):
    servers = {
        "base": rig.server(name="base"),
        "spec": rig.server("dspark", 3, name="spec", cuda_graphs=False, trace=True),
    }
    comparison = {"base": "base", "spec": "spec", "batches": [1, 4], "max_new_tokens": 96,
                  "expect": "identical"}  # fmt: skip
    plan = rig.plan(servers, {"c": comparison}, common={"args": ["--x"], "env": {"A": "1"}})
    proc = rig.run(plan, "--dry-run", "--set", "TREE=/somewhere/tree")
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
    lines = proc.stdout.splitlines()
    steps = [line.split(" ", 2)[1:] for line in lines if line[:1].isdigit()]
    assert [s[0] + " " + s[1].split(" ")[0].rstrip(":") for s in steps] == [
        "start base", "start spec", "compare c", "stop spec", "stop base",
    ]  # fmt: skip
    out = rig.out
    spec = lines.index(next(line for line in lines if line.startswith("2. start spec")))
    assert lines[spec + 1 : spec + 8] == [
        "   env A=1",
        "   env FAKE_SGLANG_NAME=spec",
        "   env PYTHONPATH=/somewhere/tree/python" + _after(),
        f"   env SGLANG_GDN_STATE_TRACE={out}/spec-trace",
        f"   cd {out}",
        f"   {sys.executable} -m sglang.launch_server --model-path {rig.model} --load-format "
        "auto --skip-tokenizer-init --host 127.0.0.1 --port '<free port>' --random-seed 0 "
        "--mem-fraction-static 0.4 --disable-cuda-graph --speculative-algorithm DSPARK "
        f"--speculative-draft-model-path {rig.draft(3)} --speculative-dspark-block-size 3 "
        f"--speculative-draft-load-format dummy --x > {out}/logs/spec.log 2>&1",
        "3. compare c: base vs spec, batch sizes 1, 4; 96 new tokens a request, greedy, "
        "ignore_eos; expect identical",
    ]
    assert not rig.out.exists() and rig.events() == []


def _after() -> str:
    """The runner's own PYTHONPATH, which the server gets after the tree's."""
    inherited = os.environ.get("PYTHONPATH")
    return f":{inherited}" if inherited else ""


def _two_comparisons(rig):
    servers = {
        "base": rig.server(name="base"),
        "g1": rig.server("dspark", 1, name="g1"),
        "g3": rig.server("dspark", 3, name="g3"),
    }
    comparison = {"base": "base", "batches": [1], "max_new_tokens": 8, "expect": "identical"}
    return rig.plan(servers, {"c1": comparison | {"spec": "g1"}, "c3": comparison | {"spec": "g3"}})


def test_only_runs_the_named_comparisons_and_starts_only_their_servers(rig):
    proc = rig.run(_two_comparisons(rig), "--dry-run", "--only", "c3")
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
    steps = [line.split(":")[0] for line in proc.stdout.splitlines() if line[:1].isdigit()]
    assert steps == ["1. start base (base)", "2. start g3 (dspark, gamma 3)", "3. compare c3",
                     "4. stop g3", "5. stop base"]  # fmt: skip


def test_only_refuses_a_comparison_the_plan_does_not_have(rig):
    proc = rig.run(_two_comparisons(rig), "--only", "c3,c2")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        "gdn-parity server-parity: error: --only c2: the plan has no such comparison (it has "
        "c1, c3)\n"
    )
    assert not rig.out.exists() and rig.events() == []


def test_only_refuses_an_empty_list(rig):
    proc = rig.run(_two_comparisons(rig), "--only", ",")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        "gdn-parity server-parity: error: --only names no comparison (the plan has c1, c3)\n"
    )
    assert not rig.out.exists()


def test_only_given_twice_runs_both_lists(rig):
    proc = rig.run(_two_comparisons(rig), "--dry-run", "--only", "c3", "--only", "c1")
    assert proc.returncode == 0, proc.stderr
    assert [line.split(":")[0] for line in proc.stdout.splitlines() if " compare " in line] == [
        "3. compare c1", "6. compare c3"
    ]  # fmt: skip
