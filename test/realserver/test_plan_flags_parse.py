"""Every server a plan under benchmark/gpu/server/plans/ starts gets a command line that
sglang's own argument parser accepts, as ``launch_server`` parses it before loading anything.

A plan's flags reach sglang only on the GPU machine. There, on 2026-12-07, every server of
contract-graphs.toml exited in its first second: ``--cuda-graph-max-bs`` is ambiguous in
sglang 0.5.23 (it has ``--cuda-graph-max-bs-decode`` and ``--cuda-graph-max-bs-prefill``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gdn_parity.realserver.launch import server_argv
from gdn_parity.realserver.plan import load_plan
from gdn_parity.servercost.plan import load_cost_plan

PLANS = Path(__file__).resolve().parents[2] / "benchmark" / "gpu" / "server" / "plans"
VALUES = {"SSM_DTYPE": "bfloat16", "KV_DTYPE": "fp8_e4m3", "MM_DEEPGEMM": "1"}


def _plan(path: Path):
    names = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", path.read_text()))
    given = {name: VALUES.get(name, f"/{name.lower()}") for name in names}
    if path.name.startswith("cost-"):
        return load_cost_plan(path, given, {})
    return load_plan(path, given, {})


def _parse_errors(argvs: list[list[str]], tree: Path) -> list[str]:
    """What sglang's parser says of each command line (empty where it accepts it), in a
    process of its own: parsing registers process-wide state."""
    script = (
        "import contextlib, io, sys\n"
        f"sys.path.insert(0, {str(tree / 'python')!r})\n"
        "from gdn_parity.sandbox import torchvision_shim, triton_interpreter_fixes\n"
        "triton_interpreter_fixes.install(); torchvision_shim.install()\n"
        "from sglang.srt.server_args import prepare_server_args\n"
        f"for argv in {argvs!r}:\n"
        "    err = io.StringIO()\n"
        "    try:\n"
        "        with contextlib.redirect_stderr(err):\n"
        "            prepare_server_args(argv)\n"
        "        print('ok')\n"
        "    except SystemExit:\n"
        "        print(err.getvalue().strip().splitlines()[-1])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.splitlines()


def _launch_args(plan, name: str) -> list[str]:
    argv = server_argv("python3", plan, plan.servers[name], "30000")
    assert argv[1:3] == ["-m", "sglang.launch_server"]
    return argv[3:]


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(PLANS.glob("*.toml")), ids=lambda p: p.name)
def test_every_server_of_a_plan_parses(path, sglang_tree):
    plan = _plan(path)
    names = sorted(plan.servers)
    said = _parse_errors([_launch_args(plan, n) for n in names], sglang_tree)
    assert dict(zip(names, said, strict=True)) == {n: "ok" for n in names}


@pytest.mark.slow
def test_the_check_sees_an_ambiguous_flag(sglang_tree):
    (said,) = _parse_errors([["--model-path", "/m", "--cuda-graph-max-bs", "64"]], sglang_tree)
    assert "ambiguous option: --cuda-graph-max-bs" in said
