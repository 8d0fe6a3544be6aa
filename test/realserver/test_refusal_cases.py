"""The launches benchmark/gpu/server/refusals.sh makes on the GPU reach the series' own
refusal in sglang's argument resolution, and the refusal names the fix the script checks.

On 2026-12-07 the script's ReplaySSM case never got there on an H200: sglang refused the
cache strategy it picked first. The CPU cannot pick the GPU's default strategy (it has no
state snapshots), so a case that names none runs here with no_buffer; a case that names
one runs as written. The cases are read from the script itself.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from gdn_parity.drift.modeldir.write import ModelDirPlan, write_model_dir

SCRIPT = Path(__file__).resolve().parents[2] / "benchmark" / "gpu" / "server" / "refusals.sh"
CASE = re.compile(r'^  "([a-z-]+)\|([^|]*)\|([^|]*)\|([^"]*)"$', re.M)


def _bash_array(name: str) -> list[str]:
    body = re.search(rf"^{name}=\((.*?)\)$", SCRIPT.read_text(), re.M | re.S).group(1)
    return shlex.split(body.replace("\n", " "))


def _cases() -> list[tuple[str, str, str, str]]:
    return CASE.findall(SCRIPT.read_text())


def test_the_script_has_the_cases_this_test_reads():
    assert [c[0] for c in _cases()] == [
        "not-gdn", "decode-backend", "ragged-verify", "replayssm", "mixed-chunk",
    ]  # fmt: skip


@pytest.mark.slow
def test_each_case_reaches_the_series_refusal(tmp_path, sglang_tree):
    write_model_dir(ModelDirPlan("tiny", tmp_path, gamma=1, device="cpu", weights=False))
    model, draft = tmp_path / "target", tmp_path / "draft"
    dense = tmp_path / "qwen3-dense"
    dense.mkdir()
    c = json.loads((draft / "config.json").read_text())
    c.update(architectures=["Qwen3ForCausalLM"], num_hidden_layers=2)
    for k in (
        "block_size",
        "num_target_layers",
        "dflash_config",
        "markov_rank",
        "markov_head_type",
    ):
        c.pop(k, None)
    (dense / "config.json").write_text(json.dumps(c))
    common = [a for a in _bash_array("common") if a not in ("--host", "127.0.0.1")]
    spec = [str(draft) if a == "$draft" else a for a in _bash_array("spec")]
    runs = []
    for name, fix, env, args in _cases():
        args = args.replace("$llama", str(dense)).replace("$model", str(model))
        argv = [a for a in args.split() if a != "${spec[*]}"]
        argv = argv[: argv.index("--port")] + ["--device", "cuda", *common]
        if "${spec[*]}" in args:
            argv += spec
        if "--mamba-radix-cache-strategy" not in argv:
            # The CPU has no mamba state snapshots, which the GPU's default strategy needs.
            argv += ["--mamba-radix-cache-strategy", "no_buffer", "--disable-overlap-schedule"]
        runs.append((name, fix, dict(e.split("=", 1) for e in env.split()), argv))
    said = {}
    for name, _, env, argv in runs:
        # A process per case, its environment set before sglang reads it.
        script = (
            "import sys\n"
            f"sys.path.insert(0, {str(sglang_tree / 'python')!r})\n"
            "from gdn_parity.sandbox import torchvision_shim, triton_interpreter_fixes\n"
            "triton_interpreter_fixes.install(); torchvision_shim.install()\n"
            "from sglang.srt.server_args import prepare_server_args\n"
            "try:\n"
            f"    prepare_server_args({argv!r}).resolve_once()\n"
            "    print('accepted')\n"
            "except Exception as e:\n"
            "    print(type(e).__name__, str(e).replace(chr(10), ' '))\n"
        )
        proc = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, **env},
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        said[name] = proc.stdout.strip().splitlines()[-1]
    for name, fix, _, _ in runs:
        assert said[name].startswith("ValueError --gdn-verify-exact-parity"), (name, said[name])
        assert fix in said[name], (name, said[name])
