"""What a first run shows while it works, and what an interrupted or refused one leaves."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import psutil
import pytest

from helpers.cli import assert_refused, sigint_as_a_terminal


@pytest.mark.needs_tree
def test_a_new_tree_says_what_it_is_doing(series, tmp_path, run_cli):
    proc = run_cli("tree", str(tmp_path / "tree"))
    assert proc.returncode == 0, proc.stderr
    assert (
        f"gdn-parity tree: applying {len(series.patches)} patches "
        f"(0001 to {len(series.patches):04d}) in {tmp_path / 'tree'}" in proc.stderr.splitlines()
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


def _signal_a_starting_demo(out, sig: int, group: bool) -> tuple[subprocess.Popen, str, list]:
    """Start a demo, send ``sig`` once its workers are importing sglang (to its process group
    with ``group``, as a terminal sends Ctrl-C), and wait for it: the process, its stderr, and
    the workers it had then."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gdn_parity.cli", "demo", "--tokens", "8", "--out", str(out)],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_a_terminal,
        start_new_session=group,
    )
    try:
        for line in proc.stderr:  # the note before the workers start
            if "starting" in line and "worker" in line:
                break
        time.sleep(3)  # the workers are importing sglang
        workers = psutil.Process(proc.pid).children(recursive=True)
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)  # returns once every worker is stopped
    finally:
        proc.kill()
    return proc, err, workers


@pytest.mark.slow
@pytest.mark.needs_tree
@pytest.mark.parametrize(
    ("sig", "status", "word", "group"),
    [
        (signal.SIGINT, 130, "interrupted", False),
        (signal.SIGTERM, 143, "terminated", False),
        (signal.SIGTERM, 143, "terminated", True),
    ],
    ids=["ctrl-c", "sigterm", "sigterm-to-the-group"],
)
def test_a_stopped_demo_stops_its_workers_and_leaves_no_output_directory(
    series, tmp_path, sig, status, word, group
):
    """Ctrl-C exits 130, SIGTERM (as `kill` and service managers send it) 143, each after
    stopping the workers; before, SIGTERM killed the demo at once and its workers ran on,
    reparented, for minutes. Sent to the process group, the signal reaches the workers too;
    before, a worker it ended first was taken for a failure, and its log stayed in the cache
    (``_no_log_in_the_users_cache`` checks)."""
    out = tmp_path / "demo-out"
    proc, err, workers = _signal_a_starting_demo(out, sig, group)
    assert proc.returncode == status, err
    assert err.splitlines()[-1] == f"gdn-parity demo: {word}"
    assert "Traceback" not in err
    assert not out.exists()
    assert workers
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive, alive


def _sigterms_until_it_exits(proc: subprocess.Popen) -> str:
    """SIGTERM, then another every millisecond until ``proc`` exits, as an impatient user or
    service manager sends them; its stderr."""
    try:
        proc.send_signal(signal.SIGTERM)
        while proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            time.sleep(0.001)
        return proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow
@pytest.mark.needs_tree
def test_sigterms_while_the_harness_server_stops_are_quiet(series):
    """Before: a SIGTERM after the first, raised again while the server stopped, printed an
    atexit callback's traceback (torch's), or killed the process (status -15, not 143)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gdn_parity.cli", "harness-server", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert "listening on http://" in proc.stdout.readline()
    err = _sigterms_until_it_exits(proc)
    assert proc.returncode == 143, err
    assert err == "gdn-parity harness-server: terminated\n"


def test_sigterms_while_a_verb_stops_are_quiet():
    """As above, for a repro that waits on a server that never answers (no tree needed)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(60)  # an error, not a wait for ever, if repro never connects
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "gdn_parity.cli", "repro", "--base-url", url, "--spec-url", url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        with listener.accept()[0]:  # connected, and never answered
            err = _sigterms_until_it_exits(proc)
    assert proc.returncode == 143, err
    assert err == "gdn-parity repro: terminated\n"


@pytest.mark.slow
@pytest.mark.needs_tree
def test_harness_server_prints_no_notice_the_user_cannot_act_on(series, tmp_path):
    err_path = tmp_path / "stderr"
    with err_path.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gdn_parity.cli", "harness-server", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
        try:
            line = proc.stdout.readline()
            assert "listening on http://" in line, err_path.read_text()
            url = line.split("listening on ")[1].strip()
            payload = {"input_ids": [1, 2, 3], "sampling_params": {"temperature": 0,
                       "max_new_tokens": 2}}  # fmt: skip
            request = urllib.request.Request(f"{url}/generate", data=json.dumps(payload).encode())
            with urllib.request.urlopen(request, timeout=300) as response:
                assert len(json.loads(response.read())["output_ids"]) == 2
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    stderr = err_path.read_text()
    for notice in ("Triton is not supported", "make_block_ptr", "Cannot detect CUDA"):
        assert notice not in stderr, stderr


def test_the_large_model_on_cpu_is_warned_about_first(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "gdn_parity.cli", "demo", "--size", "large",
         "--out", str(tmp_path / "out")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        first = proc.stderr.readline()
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert first.startswith("gdn-parity demo: warning: --size large on CPU")
    assert "takes hours" in first and "--device cuda" in first
