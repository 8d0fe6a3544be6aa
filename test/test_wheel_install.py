"""A wheel installed outside the repository: the series ships inside it, every verb finds it.

The wheel is built from a copy of what the build needs (no checkout around it), installed
with ``--no-deps`` into a fresh venv outside the repository, and run from a directory
outside it. gdn-parity's core has no dependencies, so the verbs that need no drift
harness run as a user's install would. About 6 s (build 3 s, venv and install 3 s).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.cli import assert_refused

ROOT = Path(__file__).resolve().parents[1]
BUILD_INPUTS = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "python", "patches")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The ``bin/`` of a fresh venv with the wheel installed (built with this venv's tools)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    for name in BUILD_INPUTS:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(
                source, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
            )
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(source, src / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", tmp / "dist", src],
        check=True,
    )
    (wheel,) = (tmp / "dist").glob("gdn_parity-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    subprocess.run(
        [*pip, "--python", venv / "bin" / "python", "install", "--quiet", "--no-deps",
         "--no-index", wheel],
        check=True,
    )  # fmt: skip
    return venv / "bin"


def _run(bin_dir: Path, cwd: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GDN_PARITY_PATCHES")}
    env.update(extra)
    return subprocess.run(
        [str(bin_dir / args[0]), *args[1:]], cwd=cwd, env=env, capture_output=True, text=True
    )


def test_the_installed_package_and_its_series_come_from_the_venv(installed, tmp_path):
    probe = (
        "import json, gdn_parity; from gdn_parity.queue.series import load_series; "
        "s = load_series(); print(json.dumps([gdn_parity.__file__, str(s.directory)]))"
    )
    proc = _run(installed, tmp_path, "python", "-c", probe)
    assert proc.returncode == 0, proc.stderr
    module, directory = map(Path, json.loads(proc.stdout))
    venv = installed.parent
    assert module.is_relative_to(venv) and Path(directory).is_relative_to(venv)
    shipped = {p.name: p.read_bytes() for p in directory.iterdir()}
    assert shipped == {p.name: p.read_bytes() for p in (ROOT / "patches").iterdir()}


def test_verbs_run_from_the_installed_wheel(installed, tmp_path):
    assert _run(installed, tmp_path, "gdn-parity", "--version").stdout.startswith("gdn-parity ")
    trace = tmp_path / "t.jsonl"
    header = {"type": "header", "format": "sglang-gdn-state-trace", "version": 1}
    digest = {"sha256": "a", "l2": 1.0}
    state = {"type": "state", "checkpoint": "decode_input", "rid": "r", "pos": 3, "layer": 0,
             "ssm": digest, "conv": digest}  # fmt: skip
    trace.write_text(json.dumps(header) + "\n" + json.dumps(state) + "\n")
    proc = _run(installed, tmp_path, "gdn-parity", "trace-diff", str(trace), str(trace))
    assert proc.returncode == 0, proc.stderr
    assert "no divergence" in proc.stdout
    assert_refused(
        _run(installed, tmp_path, "gdn-parity", "status", str(tmp_path / "nowhere")),
        "does not exist",
    )
    assert_refused(_run(installed, tmp_path, "gdn-parity", "export"), "the copy this install ships")


@pytest.mark.needs_tree
def test_the_installed_wheel_materialises_its_series(installed, series, tmp_path):
    proc = _run(installed, tmp_path, "gdn-parity", "tree", str(tmp_path / "tree"))
    assert proc.returncode == 0, proc.stderr
    assert f"sglang {series.version} + {len(series.patches)} patch(es)" in proc.stdout


@pytest.mark.parametrize("verb", ["demo", "cost", "harness-server"])
def test_the_drift_verbs_without_the_demo_extra_are_refused_once(verb, installed, tmp_path):
    """Before: the demo built the base and its trees, then each worker failed on the same
    ``import torch``, one error per worker on the line."""
    cache = tmp_path / "cache"
    proc = _run(installed, tmp_path, "gdn-parity", verb, GDN_PARITY_CACHE=str(cache))
    assert_refused(
        proc,
        f"gdn-parity {verb}: error: {verb} needs gdn-parity's [demo] extra, which is not "
        "installed (missing: torch, triton, ",
    )
    assert proc.stderr.rstrip().endswith(
        "pip install '/path/to/gdn-parity[demo]', or -e '.[demo]' in a checkout"
    )
    assert not cache.exists() and not (tmp_path / "demo-out").exists()


def test_model_dir_writes_configs_without_the_demo_extra_and_refuses_weights(installed, tmp_path):
    """The configs need no torch: the 27B's can be written on any machine. The weights need the
    [demo] extra (torch, safetensors): refused before anything is written."""
    proc = _run(installed, tmp_path, "gdn-parity", "model-dir", "27b", "27b", "--no-weights")
    assert proc.returncode == 0, proc.stderr
    assert sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "27b").rglob("*.json")) == [
        "27b/draft/config.json",
        "27b/target/config.json",
    ]
    proc = _run(installed, tmp_path, "gdn-parity", "model-dir", "tiny", "tiny")
    assert_refused(
        proc,
        "gdn-parity model-dir: error: model-dir needs gdn-parity's [demo] extra, which is not "
        "installed (missing: torch, ",
    )
    assert "safetensors)" in proc.stderr
    assert not (tmp_path / "tiny").exists()
