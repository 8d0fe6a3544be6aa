"""server-cost --dry-run prints every start's probe, command line and environment, what is
timed on it and the totals, and starts nothing."""

from __future__ import annotations

import os
import sys


def test_a_dry_run_lists_each_start_and_the_totals(rig):
    servers = {
        "base": rig.server(name="base"),
        "g1": rig.server("dspark", 1, name="g1", env={"A": "1"}),
    }
    benchmarks = {"b": {"servers": ["base", "g1"], "baseline": "base", "batches": [1, 4],
                        "prompt_len": 16, "short_tokens": 5, "long_tokens": 29,
                        "repeats": 2}}  # fmt: skip
    plan = rig.cost_plan(servers, benchmarks, ssm_dtype="bfloat16")
    proc = rig.run(plan, "--dry-run", "--set", "TREE=/somewhere/tree", verb="server-cost")
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
    lines = proc.stdout.splitlines()
    out = rig.out
    assert lines[0] == (
        f"plan {plan}: 1 benchmark, 2 servers, 3 starts, one server up at a time; size tiny, "
        "SSM pool bfloat16, KV cache auto"
    )
    steps = [line.split(":")[0] for line in lines if line[:1].isdigit()]
    assert steps == [
        "1. start base (base)", "2. time b on base", "3. stop base",
        "4. start g1+acc1 (dspark, gamma 1, accept length 1)", "5. time b on g1+acc1",
        "6. stop g1+acc1",
        "7. start g1+acc2 (dspark, gamma 1, accept length 2)", "8. time b on g1+acc2",
        "9. stop g1+acc2",
    ]  # fmt: skip
    start = lines.index(next(line for line in lines if line.startswith("7. start g1+acc2")))
    assert lines[start] == (
        f"7. start g1+acc2 (dspark, gamma 1, accept length 2): first the copy bandwidth "
        f"({sys.executable} -m gdn_parity.servercost.copyprobe, in its environment), then up "
        "when GET /health_generate answers 200 within 900 s; its limits from GET /server_info"
    )
    assert lines[start + 1 : start + 10] == [
        "   env FAKE_SGLANG_NAME=g1",
        "   env A=1",
        "   env SGLANG_SIMULATE_ACC_LEN=2",
        "   env SGLANG_SIMULATE_ACC_TOKEN_MODE=real-draft-token",
        "   env PYTHONPATH=/somewhere/tree/python" + _after(),
        f"   cd {out}",
        f"   {sys.executable} -m sglang.launch_server --model-path {rig.model} --load-format "
        "auto --skip-tokenizer-init --host 127.0.0.1 --port '<free port>' --random-seed 0 "
        "--mem-fraction-static 0.4 --speculative-algorithm DSPARK "
        f"--speculative-draft-model-path {rig.draft(1)} --speculative-dspark-block-size 1 "
        "--speculative-draft-load-format dummy --mamba-ssm-dtype bfloat16 --kv-cache-dtype "
        f"auto > {out}/logs/g1+acc2.log 2>&1",
        "8. time b on g1+acc2: batches 1, 4, each sent at once, 16 seeded ids a request (seed 0, "
        "below 248320); a warm-up of 5 new tokens, then 2 x (5 and 29 new tokens); greedy, "
        "ignore_eos, the cache flushed before each",
        "9. stop g1+acc2: SIGTERM to its process group, SIGKILL after 30 s",
    ]
    # 3 starts x 5 runs (a warm-up, 2 short, 2 long) x (1 + 4) requests; prompts of 16;
    # new tokens per request: 5 + 2 x (5 + 29) = 73.
    assert lines[-1] == "in all: 75 requests, 1200 prompt tokens prefilled, 1095 new tokens"
    assert not rig.out.exists() and rig.events() == []


def _after() -> str:
    """The runner's own PYTHONPATH, which the server gets after the tree's."""
    inherited = os.environ.get("PYTHONPATH")
    return f":{inherited}" if inherited else ""
