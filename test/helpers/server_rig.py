"""A bench for ``gdn-parity server-parity`` and ``server-cost`` on CPU: a fake sglang tree
(``fake_sglang``), model and draft directories, plans written from dicts, the runner's CLI,
and the fake's records of what it was asked (every start, health answer, request and, for
``server-cost``, bandwidth probe: ``cost_python`` stands in for the servers' Python)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from gdn_parity.drift.model.config import SIZES
from gdn_parity.drift.modeldir.configs import target_config

HELPERS = Path(__file__).resolve().parent


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(value)


def toml(data: dict) -> str:
    """``data`` as TOML: its scalars, then its tables (``servers.x`` for a table of tables)."""
    lines = [f"{k} = {toml_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for key, table in data.items():
        if not isinstance(table, dict):
            continue
        nested = all(isinstance(v, dict) for v in table.values()) and table
        for name, body in table.items() if nested else [(None, table)]:
            lines.append(f"\n[{key}]" if name is None else f'\n[{key}."{name}"]')
            lines += [f"{k} = {toml_value(v)}" for k, v in body.items()]
    return "\n".join(lines) + "\n"


def is_gone(pid: int) -> bool:
    """No such process, or a zombie (its parent has not reaped it; it holds nothing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat[stat.rfind(")") + 2] in "ZX"


class Rig:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.tree = root / "tree"
        (self.tree / "python" / "sglang").mkdir(parents=True)
        (self.tree / "python" / "sglang" / "__init__.py").write_text("")
        shutil.copy(
            HELPERS / "fake_sglang.py", self.tree / "python" / "sglang" / "launch_server.py"
        )
        self.model = root / "model"
        self.model.mkdir()
        (self.model / "config.json").write_text('{"architectures": ["Qwen3_5ForCausalLM"]}')
        self.records = root / "records"
        self.records.mkdir()
        self.out = root / "out"
        self.python = Path(sys.executable)  # the plan's ${PYTHON}

    def cost_python(
        self, bytes_per_s: float | None, device: str = "fake GPU", software: str = "torch 0"
    ) -> Path:
        """An interpreter for a cost plan: ``sys.executable``, but its copy probe records a
        ``probe`` event and prints ``bytes_per_s`` on ``device`` with ``software`` (None: it
        fails as on a machine without CUDA)."""
        wrapper = self.root / "cost-python"
        wrapper.write_text(
            f"#!{sys.executable}\n"
            "import json, os, sys, time\n"
            "if sys.argv[1:3] == ['-m', 'gdn_parity.servercost.copyprobe']:\n"
            "    event = {'event': 'probe', 'server': os.environ.get('FAKE_SGLANG_NAME'),\n"
            "             'pid': os.getpid(), 'time': time.time(),\n"
            "             'pythonpath': os.environ.get('PYTHONPATH')}\n"
            "    path = os.path.join(os.environ['FAKE_SGLANG_RECORD'], 'events.jsonl')\n"
            "    with open(path, 'a') as f:\n"
            "        f.write(json.dumps(event) + '\\n')\n"
            f"    if {bytes_per_s!r} is None:\n"
            "        sys.exit('copyprobe: torch sees no CUDA device')\n"
            f"    print(json.dumps({{'bytes_per_s': {bytes_per_s!r}, 'device': {device!r},\n"
            f"                      'software': {software!r}}}))\n"
            "    sys.exit(0)\n"
            f"os.execv({sys.executable!r}, [{sys.executable!r}, *sys.argv[1:]])\n"
        )
        wrapper.chmod(0o755)
        self.python = wrapper
        return wrapper

    def draft(self, gamma: int) -> Path:
        draft = self.root / f"draft-g{gamma}"
        if not draft.exists():
            draft.mkdir()
            config = {"architectures": ["Qwen3DSparkModel"], "block_size": gamma}
            (draft / "config.json").write_text(json.dumps(config))
        return draft

    def server(self, mode: str = "base", gamma: int = 1, **keys) -> dict:
        """A server of the fake tree, named in its records by ``name`` (a key it removes)."""
        name = keys.pop("name")
        body = {"tree": "${TREE}", "mode": mode, "model": str(self.model), "mem_fraction": 0.4}
        if mode == "dspark":
            body |= {"gamma": gamma, "draft": str(self.draft(gamma))}
        env = {"FAKE_SGLANG_NAME": name, **keys.pop("env", {})}
        return body | {"env": env} | keys

    def plan(self, servers: dict, comparisons: dict, **top) -> Path:
        data = {"python": "${PYTHON}", **top, "servers": servers, "comparisons": comparisons}
        path = self.root / "plan.toml"
        path.write_text(toml(data))
        return path

    def cost_plan(self, servers: dict, benchmarks: dict, **top) -> Path:
        """A cost plan of size tiny, whose geometry the fake model's config.json gets."""
        config = target_config(SIZES["tiny"])
        (self.model / "config.json").write_text(json.dumps(config))
        data = {"python": "${PYTHON}", "size": "tiny", **top, "servers": servers,
                "benchmarks": benchmarks}  # fmt: skip
        path = self.root / "plan.toml"
        path.write_text(toml(data))
        return path

    def env(self) -> dict[str, str]:
        return {**os.environ, "FAKE_SGLANG_RECORD": str(self.records)}

    def args(self, plan: Path, *extra: str, verb: str = "server-parity") -> list[str]:
        return [
            sys.executable, "-m", "gdn_parity.cli", verb, str(plan),
            "--out", str(self.out), "--set", f"TREE={self.tree}", "--set",
            f"PYTHON={self.python}", *extra,
        ]  # fmt: skip

    def run(
        self, plan: Path, *extra: str, timeout: float = 120, verb: str = "server-parity"
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.args(plan, *extra, verb=verb), capture_output=True, text=True, env=self.env(),
            timeout=timeout,
        )  # fmt: skip

    def events(self, kind: str | None = None) -> list[dict]:
        path = self.records / "events.jsonl"
        if not path.exists():
            return []
        events = [json.loads(line) for line in path.read_text().splitlines()]
        return [e for e in events if kind is None or e["event"] == kind]

    def results(self) -> dict:
        return json.loads((self.out / "results.json").read_text())

    def pids(self) -> list[int]:
        """Every process the fakes started: the servers and their children."""
        return [p for e in self.events("start") for p in (e["pid"], e["child"])]

    def wait_gone(self, seconds: float = 15) -> list[int]:
        """The fakes' processes still alive after up to ``seconds`` (none, when all is well)."""
        deadline = time.monotonic() + seconds
        while (alive := [p for p in self.pids() if not is_gone(p)]) and time.monotonic() < deadline:
            time.sleep(0.05)
        return alive
