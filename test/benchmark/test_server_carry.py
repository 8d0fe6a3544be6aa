"""benchmark/gpu/server's carry: the call plan, and the device side's checks of what arrives.

receive.sh and install.sh run here as they run on the GPU machine, on a small payload cut
the way build_carry.sh cuts the real one (tar | xz | split, SHA256SUMS with every part and
the whole payload).
"""

from __future__ import annotations

import hashlib
import importlib.util
import lzma
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "benchmark" / "gpu" / "server"
MiB = 2**20


def _plan_calls():
    spec = importlib.util.spec_from_file_location("plan_calls", SERVER / "plan_calls.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


plan_calls = _plan_calls()


def test_plan_fills_calls_up_to_the_limit_with_the_sums_in_each():
    sizes = {plan_calls.SUMS: 1000} | {f".gpu/srv/part-{i:02}": 20 * MiB for i in range(7)}
    calls = plan_calls.plan(sizes, checkout=10 * MiB)
    assert [len(c.carry) for c in calls] == [3, 3, 3, 2]  # two 20 MiB parts beside 10 MiB
    assert all(c.carry[0] == plan_calls.SUMS for c in calls)
    assert [p for c in calls for p in c.carry[1:]] == list(sizes)[1:]  # in order, each once
    assert all(10 * MiB + 1000 + c.size <= 64 * MiB for c in calls)


def test_plan_keeps_to_eight_paths_a_call():
    sizes = {plan_calls.SUMS: 10} | {f"f{i}": 1 for i in range(20)}
    calls = plan_calls.plan(sizes, checkout=0)
    assert max(len(c.carry) for c in calls) == plan_calls.MAX_PATHS
    assert sum(len(c.carry) - 1 for c in calls) == 20


def test_plan_refuses_a_part_no_call_can_carry():
    sizes = {plan_calls.SUMS: 10, ".gpu/srv/part-00": 60 * MiB}
    with pytest.raises(plan_calls.PlanError, match="part-00 .* smaller parts"):
        plan_calls.plan(sizes, checkout=10 * MiB)


@pytest.fixture
def device(tmp_path: Path) -> Path:
    """A checkout as the device sees it: the server scripts, and a payload's parts and sums
    in .gpu/srv (built here as build_carry.sh builds them)."""
    repo = tmp_path / "repo"
    scripts = repo / "benchmark" / "gpu" / "server"
    scripts.mkdir(parents=True)
    for name in ("receive.sh", "install.sh"):
        shutil.copy(SERVER / name, scripts / name)
    site = tmp_path / "site-src"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("VALUE = 42\n")
    (site / "pkg" / "blob.bin").write_bytes(bytes(range(256)) * 400)
    tar = tmp_path / "payload.tar"
    with tarfile.open(tar, "w") as archive:
        archive.add(site, arcname=".")
    payload = lzma.compress(tar.read_bytes())
    srv = repo / ".gpu" / "srv"
    srv.mkdir(parents=True)
    cut = len(payload) // 3 + 1
    sums = []
    for i in range(3):
        part = payload[i * cut : (i + 1) * cut]
        (srv / f"part-{i:02}").write_bytes(part)
        sums.append(f"{hashlib.sha256(part).hexdigest()}  part-{i:02}")
    sums.append(f"{hashlib.sha256(payload).hexdigest()}  payload")
    (srv / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    return repo


def _run(repo: Path, script: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "CARRY_DIR": str(tmp_path / "carry")}
    env["SITE"] = str(tmp_path / "site")
    return subprocess.run(
        ["bash", str(repo / "benchmark/gpu/server" / script)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_receive_moves_checked_parts_out_and_install_unpacks_them(device, tmp_path):
    received = _run(device, "receive.sh", tmp_path)
    assert received.returncode == 0, received.stderr
    assert "3 of 3 parts" in received.stdout
    assert not list((device / ".gpu" / "srv").glob("part-*"))  # moved out of the checkout
    installed = _run(device, "install.sh", tmp_path)
    assert installed.returncode == 0, installed.stderr
    assert (tmp_path / "site" / "pkg" / "__init__.py").read_text() == "VALUE = 42\n"
    assert (tmp_path / "site" / "pkg" / "blob.bin").read_bytes() == bytes(range(256)) * 400
    assert not (tmp_path / "site.part").exists()
    marker = (tmp_path / "site" / ".payload").read_text()
    (tmp_path / "site" / "pkg" / "__init__.py").write_text("changed\n")
    again = _run(device, "install.sh", tmp_path)  # the same payload: left as it is
    assert again.returncode == 0 and (tmp_path / "site" / ".payload").read_text() == marker
    assert (tmp_path / "site" / "pkg" / "__init__.py").read_text() == "changed\n"


def test_receive_refuses_and_deletes_a_corrupt_part(device, tmp_path):
    part = device / ".gpu" / "srv" / "part-01"
    data = part.read_bytes()
    part.write_bytes(bytes([data[0] ^ 0xFF]) + data[1:])  # always another byte (b"x" was not)
    received = _run(device, "receive.sh", tmp_path)
    assert received.returncode == 2
    assert received.stderr.count("\n") == 1 and "part-01 does not match" in received.stderr
    assert not part.exists()
    assert not (tmp_path / "carry" / "part-01").exists()


def test_install_refuses_until_every_part_is_there(device, tmp_path):
    (device / ".gpu" / "srv" / "part-02").unlink()
    assert _run(device, "receive.sh", tmp_path).returncode == 0
    installed = _run(device, "install.sh", tmp_path)
    assert installed.returncode == 2
    assert "parts not received yet: part-02" in installed.stderr
    assert not (tmp_path / "site").exists() and not (tmp_path / "site.part").exists()


def test_install_refuses_parts_of_two_builds(device, tmp_path):
    assert _run(device, "receive.sh", tmp_path).returncode == 0
    sums = tmp_path / "carry" / "SHA256SUMS"
    lines = sums.read_text().splitlines()
    sums.write_text("\n".join(lines[:-1] + ["0" * 64 + "  payload"]) + "\n")
    installed = _run(device, "install.sh", tmp_path)
    assert installed.returncode == 2 and "do not make the payload" in installed.stderr
    assert not (tmp_path / "site").exists()
