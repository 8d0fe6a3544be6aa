"""What a first run shows while it works, and what an interrupted or refused one leaves."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import pytest

from helpers.cli import assert_refused


@pytest.mark.needs_tree
def test_a_new_tree_says_what_it_is_doing(series, tmp_path, run_cli):
    proc = run_cli("tree", str(tmp_path / "tree"))
    assert proc.returncode == 0, proc.stderr
    assert (
        f"gdn-parity: applying {len(series.patches)} patch(es) in {tmp_path / 'tree'}"
        in proc.stderr.splitlines()
    )
    again = run_cli("tree", str(tmp_path / "tree"))
    assert again.returncode == 0 and again.stderr == ""  # nothing to do, nothing said


@pytest.mark.needs_tree
def test_an_os_error_is_a_clean_error(tmp_path, run_cli):
    a_file = tmp_path / "a-file"
    a_file.write_text("keep me\n")
    assert_refused(run_cli("tree", str(a_file / "tree")), f"{a_file}")
    assert a_file.read_text() == "keep me\n"


@pytest.mark.needs_tree
def test_harness_server_on_a_port_in_use_fails_before_loading_the_model(run_cli):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        started = time.monotonic()
        proc = run_cli("harness-server", "--port", str(port), timeout=120)
        seconds = time.monotonic() - started
    assert_refused(proc, f"cannot listen on 127.0.0.1:{port}: Address already in use")
    assert "Triton is not supported" not in proc.stderr
    assert seconds < 30, seconds  # the model takes longer than this to build on CPU


@pytest.mark.slow
@pytest.mark.needs_tree
def test_an_interrupted_demo_exits_130_and_leaves_no_output_directory(series, tmp_path):
    out = tmp_path / "demo-out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gdn_parity.cli", "demo", "--tokens", "8", "--out", str(out)],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        for line in proc.stderr:  # the note before the workers start
            if "starting" in line and "worker" in line:
                break
        time.sleep(3)  # the workers are importing sglang
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)  # returns once every worker is stopped
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert err.splitlines()[-1] == "gdn-parity: interrupted"
    assert "Traceback" not in err
    assert not out.exists()
