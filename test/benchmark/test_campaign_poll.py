"""benchmark/gpu/server's start.sh and poll.sh, run here as on the GPU machine: poll.sh waits
for the campaign start.sh launched, however many earlier campaigns logged into OUTDIR."""

from __future__ import annotations

import os
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "benchmark" / "gpu" / "server"
EARLIER = "21:44:01 campaign done\n"  # an earlier campaign's last line in the same OUTDIR


def _poll(out: Path, tmp_path: Path, seconds: int | str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"OUT": str(tmp_path)}
    return subprocess.run(
        ["bash", str(SERVER / "poll.sh"), str(out), str(seconds)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """The campaign's OUTDIR."""
    camp = tmp_path / "camp"
    camp.mkdir()
    return camp


def _refused(proc: subprocess.CompletedProcess[str], tmp_path: Path, line: str) -> None:
    """Exit 2, one line on stderr, nothing packed."""
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [line]
    assert not (tmp_path / "campaign.tgz").exists()


def _pid_file(out: Path, pid: int, started: int | None = None) -> None:
    """What start.sh writes: the pid and its start time (field 22 of /proc/PID/stat)."""
    if started is None:
        stat = Path(f"/proc/{pid}/stat").read_text()
        started = int(stat.rsplit(") ", 1)[1].split()[19])
    (out / "campaign.pid").write_text(f"{pid} {started}\n")


def test_poll_waits_for_a_running_campaign_despite_an_earlier_done_line(tmp_path):
    # It used to wait for "campaign done" in the log, which an earlier campaign had written:
    # the poll returned at once, and a device call was spent waiting on nothing.
    out = tmp_path / "camp"
    out.mkdir()
    (out / "campaign.log").write_text(EARLIER + "21:44:15 campaign: graphs-fp8kv\n")
    campaign = subprocess.Popen(["sleep", "3"])
    _pid_file(out, campaign.pid)
    began = time.monotonic()
    proc = _poll(out, tmp_path, 60)
    waited = time.monotonic() - began
    campaign.wait()
    assert proc.returncode == 0, proc.stderr
    assert waited >= 2.5, f"poll.sh returned after {waited:.1f} s, before the campaign ended"
    assert f"poll.sh: campaign {campaign.pid} has ended" in proc.stdout
    with tarfile.open(tmp_path / "campaign.tgz") as packed:
        assert "campaign/campaign.log" in packed.getnames()


def test_poll_says_a_campaign_still_runs_when_its_time_is_up(tmp_path, out):
    (out / "campaign.log").write_text(
        "21:50:21 campaign: graphs-fp32\n21:50:21 start graphs-fp32\n"
    )
    (out / "graphs-fp32.out").write_text("gdn-parity server-parity: up base after 310.4 s\n")
    campaign = subprocess.Popen(["sleep", "30"])
    try:
        _pid_file(out, campaign.pid)
        proc = _poll(out, tmp_path, 1)
    finally:
        campaign.kill()
        campaign.wait()
    assert proc.returncode == 0, proc.stderr
    assert f"poll.sh: campaign {campaign.pid} still runs; graphs-fp32's last lines:" in proc.stdout
    assert "up base after 310.4 s" in proc.stdout


def test_start_launches_the_campaign_and_poll_sees_it_end(tmp_path, out):
    (out / "campaign.log").write_text(EARLIER)
    start = subprocess.run(
        ["bash", str(SERVER / "start.sh"), str(out), "no-such-step"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert start.returncode == 0, start.stderr
    pid, started = map(int, (out / "campaign.pid").read_text().split())
    assert started > 0
    proc = _poll(out, tmp_path, 60)
    assert proc.returncode == 0, proc.stderr
    assert f"poll.sh: campaign {pid} has ended" in proc.stdout
    log = (out / "campaign.log").read_text()
    assert "unknown step no-such-step" in log
    assert log.count("campaign done") == 2


def test_poll_without_a_started_campaign_is_refused_and_packs_nothing(tmp_path, out):
    (out / "campaign.log").write_text(EARLIER)
    proc = _poll(out, tmp_path, 1)
    _refused(proc, tmp_path, f"poll.sh: no {out}/campaign.pid: start the campaign with start.sh")


def test_a_pid_that_another_process_reuses_is_not_waited_on(tmp_path, out):
    other = subprocess.Popen(["sleep", "30"])
    try:
        _pid_file(out, other.pid, started=1)  # the campaign's pid, now another process's
        began = time.monotonic()
        proc = _poll(out, tmp_path, 20)
    finally:
        other.kill()
        other.wait()
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - began < 10
    assert f"poll.sh: campaign {other.pid} has ended" in proc.stdout


@pytest.mark.parametrize("pid_text", ["hello\n", "123\n"])
def test_a_pid_file_without_pid_and_start_time_is_refused(tmp_path, out, pid_text):
    (out / "campaign.pid").write_text(pid_text)
    proc = _poll(out, tmp_path, 1)
    _refused(
        proc,
        tmp_path,
        f"poll.sh: {out}/campaign.pid holds no pid and start time: start the campaign with "
        "start.sh",
    )


@pytest.mark.parametrize("seconds", ["abc", "10s", "-1"])
def test_seconds_that_are_no_number_are_refused(tmp_path, out, seconds):
    proc = _poll(out, tmp_path, seconds)
    _refused(proc, tmp_path, "poll.sh: usage: poll.sh OUTDIR SECONDS (or OUTDIR --running)")


def test_start_refuses_an_outdir_whose_campaign_still_runs(tmp_path, out):
    campaign = subprocess.Popen(["sleep", "30"])
    try:
        _pid_file(out, campaign.pid)
        proc = subprocess.run(
            ["bash", str(SERVER / "start.sh"), str(out), "no-such-step"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        campaign.kill()
        campaign.wait()
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"start.sh: a campaign still runs in {out}: poll it, or give another OUTDIR"
    ]
    assert not (out / "campaign.log").exists()


def test_start_takes_a_relative_outdir_from_where_it_is_run(tmp_path):
    proc = subprocess.run(
        ["bash", str(SERVER / "start.sh"), "camp", "no-such-step"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "camp" / "campaign.pid").exists()
    assert _poll(tmp_path / "camp", tmp_path, 60).returncode == 0
    assert "unknown step no-such-step" in (tmp_path / "camp" / "campaign.log").read_text()
