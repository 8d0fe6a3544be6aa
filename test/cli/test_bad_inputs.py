"""Every verb refuses bad input with one line on stderr, exit status 2, and changes nothing.

Exit status 1 is reserved for "diverged / parity broken", so no input error may use it.
None of these needs the session's tree: each check comes before any work (a test whose
refusal is of a tree to reuse makes one in a cache of its own).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gdn_parity.cli.main import build_parser
from gdn_parity.queue.base import fetch_wheel
from helpers.cli import assert_refused, is_note, scratch_cache_in, sigint_as_a_terminal

HEADER = {"type": "header", "format": "sglang-gdn-state-trace", "version": 1}


def _verb_parsers() -> dict[str, argparse.ArgumentParser]:
    return next(
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    ).choices


VERBS = sorted(_verb_parsers())
# What each verb needs before an unknown argument is the only thing wrong.
REQUIRED = {
    "apply": ["TARGET"],
    "status": ["TARGET"],
    "trace-diff": ["BASE", "SPEC"],
    "repro": ["--base-url", "http://h:1", "--spec-url", "http://h:1"],
    "server-parity": ["PLAN", "--out", "OUT"],
    "server-cost": ["PLAN", "--out", "OUT"],
    "model-dir": ["tiny", "OUT"],
}
DIGEST = {"sha256": "s", "dtype": "bfloat16", "shape": [1], "absmax": 1.0, "l2": 1.0}
# Whether torch sees a CUDA device (the test bed has none: the refusals below are for that).
CUDA = (
    subprocess.run(
        [sys.executable, "-c", "import torch, sys; sys.exit(torch.cuda.is_available())"]
    ).returncode
    != 0
)


def _record(pos: int, **extra) -> dict:
    return {"type": "state", "checkpoint": "decode_input", "rid": "r", "pos": pos, "layer": 0,
            "ssm": DIGEST, "conv": DIGEST, "token": 1, "token_pos": pos, **extra}  # fmt: skip


def _trace_text(records: int = 70) -> str:
    return "\n".join(json.dumps(r) for r in [HEADER, *map(_record, range(records))]) + "\n"


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def good_trace(tmp_path) -> Path:
    path = tmp_path / "good.jsonl"
    path.write_text(_trace_text())
    return path


# --- trace-diff ---------------------------------------------------------------


def _bad_trace(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"{kind}.jsonl"
    text = _trace_text()
    if kind == "binary":
        path.write_bytes(bytes(range(256)) * 4)
    elif kind == "truncated":
        path.write_text(text[: text.rindex("}") - 3])  # the last (71st) line cut short
    elif kind == "broken-line-63":
        lines = text.splitlines()
        lines[62] = lines[62][:20]
        path.write_text("\n".join(lines) + "\n")
    elif kind == "damaged-gzip":
        path.write_bytes(gzip.compress(text.encode())[:40])
    elif kind == "empty":
        path.write_text("")
    elif kind == "not-an-object":
        path.write_text(json.dumps(HEADER) + "\n[1, 2]\n")
    elif kind == "record-without-keys":
        path.write_text(json.dumps(HEADER) + '\n{"type": "state", "pos": 1}\n')
    elif kind == "unknown-checkpoint":
        path.write_text(json.dumps(HEADER) + "\n" + json.dumps(_record(1, checkpoint="x")) + "\n")
    elif kind == "verify-step-without-step":
        record = _record(1, checkpoint="verify_step")
        path.write_text(json.dumps(HEADER) + "\n" + json.dumps(record) + "\n")
    elif kind == "a-directory":
        path.mkdir()
    elif kind in WRONG_FIELDS:
        key, value = WRONG_FIELDS[kind]
        records = [_record(0), {**_record(1, checkpoint="verify_step", step=0), key: value}]
        path.write_text("\n".join(json.dumps(r) for r in [HEADER, *records]) + "\n")
    elif kind == "flags-a-list":
        path.write_text(text.replace(json.dumps(HEADER), json.dumps({**HEADER, "flags": ["x"]})))
    elif kind == "digest-without-l2":
        digest = {k: v for k, v in DIGEST.items() if k != "l2"}
        path.write_text(text + json.dumps(_record(70, ssm={**digest, "sha256": "t"})) + "\n")
    elif kind == "nested-100k-deep":
        path.write_text(json.dumps(HEADER) + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    elif kind == "a-5000-digit-number":
        path.write_text(json.dumps(HEADER) + '\n{"type": "state", "pos": ' + "9" * 5000 + "}\n")
    return path


# A field of the third line (a verify_step record) of the wrong JSON type. Before, each was an
# internal error (exit 70) where the field was used: sorted, subtracted or hashed.
WRONG_FIELDS = {
    "pos-a-string": ("pos", "1"),
    "layer-a-string": ("layer", "0"),
    "step-a-string": ("step", "0"),
    "rid-a-list": ("rid", ["r"]),
    "checkpoint-a-list": ("checkpoint", ["verify_step"]),
}


@pytest.mark.parametrize(
    "kind,message",
    [
        ("binary", "is not a text file"),
        ("truncated", "line 71 is not JSON (the last line: is the file truncated"),
        ("broken-line-63", "line 63 is not JSON"),
        ("damaged-gzip", "is a damaged or truncated gzip file"),
        ("empty", "is not a GDN state trace"),
        ("not-an-object", "line 2 is not a JSON object"),
        ("record-without-keys", "line 2 lacks"),
        ("unknown-checkpoint", "line 2 has an unknown checkpoint 'x'"),
        ("verify-step-without-step", "line 2 is a verify_step record without ['step']"),
        ("a-directory", "cannot read"),
        ("missing", "cannot read"),
        ("pos-a-string", "line 3 has a string for 'pos', not an integer"),
        ("layer-a-string", "line 3 has a string for 'layer', not an integer"),
        ("step-a-string", "line 3 has a string for 'step', not an integer"),
        ("rid-a-list", "line 3 has a list for 'rid', not a string or an integer"),
        ("checkpoint-a-list", "line 3 has a list for 'checkpoint', not a string"),
        ("flags-a-list", "line 1 has a list for 'flags', not an object"),
        ("digest-without-l2", "line 72 lacks ['l2'] in its ssm digest"),
        ("nested-100k-deep", "line 2 nests deeper than Python's JSON reader goes"),
        ("a-5000-digit-number", "line 2 holds a number too long to read"),
    ],
)
def test_trace_diff_refuses_a_file_that_is_not_a_trace(
    kind, message, tmp_path, good_trace, run_cli
):
    bad = _bad_trace(tmp_path, kind)
    assert_refused(run_cli("trace-diff", str(good_trace), str(bad)), f"{bad}")
    assert_refused(run_cli("trace-diff", str(bad), str(good_trace)), message)


def test_trace_diff_reads_a_gzipped_trace(tmp_path, good_trace, run_cli):
    gz = tmp_path / "good.jsonl.gz"
    gz.write_bytes(gzip.compress(good_trace.read_bytes()))
    proc = run_cli("trace-diff", str(gz), str(good_trace))
    assert proc.returncode == 0, proc.stderr
    assert "no divergence" in proc.stdout


def test_trace_diff_refuses_a_negative_context(good_trace, run_cli):
    proc = run_cli("trace-diff", str(good_trace), str(good_trace), "--context", "-1")
    assert_refused(proc, "trace-diff: error: argument --context: '-1' must be at least 0")


# --- repro --------------------------------------------------------------------


@pytest.mark.parametrize(
    "url,message",
    [
        ("notaurl", "'notaurl' is not an http(s) URL"),
        ("http://[::1", "'http://[::1' is not a valid URL"),
        ("http://host:99999", "is not a valid URL"),
        ("http://host:port", "is not a valid URL"),
        ("ftp://host", "is not an http(s) URL"),
        ("http://", "is not an http(s) URL"),
    ],
)
def test_repro_refuses_a_url_that_is_not_one(url, message, run_cli):
    assert_refused(run_cli("repro", "--base-url", url, "--spec-url", "http://h:1"), message)
    assert_refused(run_cli("repro", "--base-url", "http://h:1", "--spec-url", url), message)


@pytest.mark.parametrize(
    "content,message",
    [
        (bytes(range(256)), "is not a text file of token ids"),
        (b"[1, 2", "is not a list of token ids"),
        (b"[1.5, 2]", "is not a list of token ids"),
        (b'[1, "2"]', "is not a list of token ids"),
        (b"[true]", "is not a list of token ids"),
        (b"1, 2, x", "is not a list of token ids"),
        (b"", "holds no token ids"),
        (b"1, -2", "holds no token ids, or negative ones"),
        (None, "cannot read"),
    ],
)
def test_repro_refuses_input_ids_that_are_not_token_ids(content, message, tmp_path, run_cli):
    path = tmp_path / "ids"
    if content is not None:
        path.write_bytes(content)
    proc = run_cli(
        "repro", "--base-url", "http://h:1", "--spec-url", "http://h:1", "--input-ids", str(path)
    )
    assert_refused(proc, message)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--timeout", "0"], "argument --timeout: '0' is not a finite number of seconds above 0"),
        (["--timeout", "nan"], "argument --timeout: 'nan' is not a finite number of seconds"),
        (["--timeout", "inf"], "argument --timeout: 'inf' is not a finite number of seconds"),
        (["--timeout", "x"], "argument --timeout: 'x' is not a finite number of seconds"),
        # Before: an internal error (exit 70), the socket's OverflowError.
        (["--timeout", "1e12"], "argument --timeout: '1e12' is more than 86400 seconds (a day)"),
        (["--timeout", "1e17"], "argument --timeout: '1e17' is more than 86400 seconds"),
        (["--timeout", "1e300"], "argument --timeout: '1e300' is more than 86400 seconds"),
        (["--timeout", "86401"], "argument --timeout: '86401' is more than 86400 seconds"),
        (["--repeats", "0"], "argument --repeats: '0' must be at least 1"),
        (["--max-new-tokens", "x"], "argument --max-new-tokens: 'x' is not an integer"),
        ([], "the following arguments are required: --base-url, --spec-url"),
    ],
)
def test_repro_refuses_bad_numbers(args, message, run_cli):
    urls = ["--base-url", "http://h:1", "--spec-url", "http://h:1"] if args else []
    assert_refused(run_cli("repro", *urls, *args), message)


def test_repro_takes_a_timeout_of_a_day(run_cli):
    """The longest --timeout accepted: the refusal is of the server, not of the option."""
    with socket.create_server(("127.0.0.1", 0)) as closed:
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    proc = run_cli("repro", "--base-url", url, "--spec-url", url, "--timeout", "86400")
    assert_refused(proc, f"{url}/generate is unreachable")


def test_ctrl_c_exits_130_with_a_short_message():
    """A repro waiting on a server that never answers, interrupted as a terminal would."""
    listener = socket.create_server(("127.0.0.1", 0))
    connected = threading.Event()
    held = []

    def accept() -> None:
        held.append(listener.accept()[0])  # hold the connection open, answer nothing
        connected.set()

    threading.Thread(target=accept, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gdn_parity.cli", "repro", "--base-url", url, "--spec-url", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_a_terminal,
    )
    try:
        assert connected.wait(30), "repro never connected"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        for conn in held:
            conn.close()
        listener.close()
    assert proc.returncode == 130
    assert err == "gdn-parity repro: interrupted\n"  # before: no verb, as errors have


# --- demo and harness-server ----------------------------------------------------


@pytest.mark.parametrize(
    "args,message",
    [
        (["--jobs", "0"], "argument --jobs: '0' must be at least 1"),
        (["--jobs", "x"], "argument --jobs: 'x' is not an integer"),
        (["--seed", "x"], "argument --seed: 'x' is not an integer"),
        (["--gammas", "1,,2"], "argument --gammas: '1,,2' is not a comma-separated list"),
        (["--gammas", "1,"], "is not a comma-separated list of integers"),
        (["--gammas", "a"], "is not a comma-separated list of integers"),
        (["--accept-rates", "0.5,,0.9"], "argument --accept-rates: '0.5,,0.9' is not"),
        (["--accept-rates", "nan"], "argument --accept-rates: 'nan': every item must be a prob"),
        (["--accept-rates", "0.5,1.5"], "argument --accept-rates: '0.5,1.5': every item must"),
        (["--gammas", "0"], "argument --gammas: '0': every item must be at least 1"),
        (["--gammas", "1,-2"], "argument --gammas: '1,-2': every item must be at least 1"),
        (["--size", "huge"], "argument --size: invalid choice: 'huge'"),
        (["--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
        (["--ssm-dtype", "int8"], "argument --ssm-dtype: invalid choice"),
        (["--variants", "0.5.23,nightly"], "argument --variants: no variant 'nightly'"),
        (["--variants", "0.5.23,0.5.23"], "argument --variants: '0.5.23,0.5.23' names a variant"),
        (["--tokens", "1"], "argument --tokens: '1' must be at least 2"),
        # Before: accepted; the workers overflowed and the error's reason was a lone '"'.
        (["--tokens", "99999999999999999999"], "argument --tokens: '99999999999999999999' must"),
        # Before: a warning, then minutes of work until the host ran out of memory.
        (["--size", "27b"], "--size 27b is a GPU size (26.9 B parameters;"),
        (["--size", "27b-8l"], "--size 27b-8l is a GPU size (5.6 B parameters;"),
        (["--natural-gamma", "0"], "argument --natural-gamma: '0' must be at least 1"),
        (["--frobnicate"], "gdn-parity demo: error: unrecognized arguments: --frobnicate"),
        (["--batch", "4"], "--batch: the row-wise stack serves one request"),
        (["--stack", "server", "--batch", "300"], "--batch 300: at most 256"),
        (["--stack", "server", "--batch", "0"], "argument --batch: '0' must be at least 1"),
        (["--kv-cache-dtype", "fp9"], "argument --kv-cache-dtype: invalid choice: 'fp9' (choose"),
        # the row-wise stack (the CPU default) has no sglang KV pool to quantize
        (["--kv-cache-dtype", "fp8_e4m3"], "--kv-cache-dtype fp8_e4m3: the row-wise stack keeps "
         "K/V in the model's dtype (it has no sglang KV pool); pass --stack server"),
        (["--stack", "rowwise", "--kv-cache-dtype", "fp8_e4m3"], "the row-wise stack keeps K/V"),
        (["--stack", "server", "--kv-cache-scale", "2"], "--kv-cache-scale scales K/V into a "
         "quantized pool: pass --kv-cache-dtype fp8_e4m3 with it"),
        (["--stack", "server", "--kv-cache-dtype", "fp8_e4m3", "--kv-cache-scale", "0"],
         "argument --kv-cache-scale: '0' is not a finite number above 0"),
        (["--stack", "server", "--kv-cache-dtype", "fp8_e4m3", "--kv-cache-scale", "inf"],
         "argument --kv-cache-scale: 'inf' is not a finite number above 0"),
    ],
)  # fmt: skip
def test_demo_refuses_bad_arguments_before_any_work(args, message, tmp_path, run_cli):
    proc = run_cli("demo", *args, "--out", str(tmp_path / "out"))
    assert_refused(proc, message)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("option", ["--out", "--trace"])
def test_demo_refuses_an_output_directory_it_cannot_write(option, tmp_path, run_cli):
    a_file = tmp_path / "a-file"
    a_file.write_text("keep me\n")
    assert_refused(run_cli("demo", option, str(a_file)), "exists and is not a directory")
    assert_refused(run_cli("demo", option, str(a_file / "sub" / "dir")), "cannot be written")
    assert_refused(run_cli("demo", option, "/proc/gdn-parity-out"), "cannot be written")
    assert _files(tmp_path) == {"a-file": b"keep me\n"}


def test_demo_refuses_a_trace_file_before_it_probes_demo_out(tmp_path, run_cli):
    """``demo --trace FILE`` with the default --out. Before: demo-out/ was made and removed
    again (its probe came first) before --trace was refused, which the directory it sits in
    shows in its modification time."""
    (tmp_path / "a-file").write_text("keep me\n")
    before = tmp_path.stat().st_mtime_ns
    proc = run_cli("demo", "--trace", "a-file", cwd=tmp_path)
    assert_refused(proc, "--trace a-file exists and is not a directory")
    assert _files(tmp_path) == {"a-file": b"keep me\n"}
    assert tmp_path.stat().st_mtime_ns == before


@pytest.mark.skipif(CUDA, reason="this machine has CUDA: the refusal is for machines without it")
@pytest.mark.parametrize("verb", ["demo", "harness-server"])
def test_cuda_without_cuda_is_refused_at_start_up(verb, tmp_path, run_cli):
    proc = run_cli(verb, "--device", "cuda", *(["--out", str(tmp_path / "o")] * (verb == "demo")))
    assert_refused(proc, "--device cuda, but torch sees no CUDA device: run on CPU")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(CUDA, reason="this machine has CUDA: the refusal is for machines without it")
@pytest.mark.parametrize(
    "args,on_cpu",
    [
        ([], "--device cpu"),
        (["--stack", "rowwise"], "--device cpu"),
        (["--kv-cache-dtype", "fp8_e4m3"], "--device cpu --stack server"),
        (["--batch", "4"], "--device cpu --stack server"),
        (["--variants", "deterministic-exact-parity"], "--device cpu --stack server"),
    ],
)
def test_a_demo_without_cuda_names_what_runs_it_on_cpu(args, on_cpu, tmp_path, run_cli):
    """The refusal names the arguments that run the same demo on CPU. Before: always
    --device cpu, whose default row-wise stack then refused an FP8 KV cache, a batch or
    deterministic inference (helper-9)."""
    proc = run_cli("demo", "--device", "cuda", *args, "--out", str(tmp_path / "o"))
    assert_refused(proc, f"torch sees no CUDA device: run on CPU with {on_cpu}")
    assert proc.stderr.rstrip().endswith(on_cpu)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args,message",
    [
        (["demo", "--variants", "deterministic", "--out", "{out}"],
         "variants ['deterministic'] enable deterministic inference, which only the server "
         "stack runs: pass --stack server"),
        (["demo", "--stack", "rowwise", "--kv-cache-dtype", "fp8_e4m3", "--out", "{out}"],
         "--kv-cache-dtype fp8_e4m3: the row-wise stack keeps K/V in the model's dtype"),
        (["--patches", "{tmp}/nowhere", "demo", "--out", "{out}"], "/nowhere has no series file"),
        pytest.param(["demo", "--device", "cuda", "--out", "{out}"], "torch sees no CUDA device",
                     marks=pytest.mark.skipif(CUDA, reason="the refusal is for machines without "
                                              "CUDA")),
        (["--patches", "{tmp}/nowhere", "harness-server", "--trace", "{out}"],
         "/nowhere has no series file"),
        (["harness-server", "--port", "{taken}", "--trace", "{out}"], "cannot listen on"),
        (["demo", "--out", "{out}", "--trace", "/proc/gdn-parity-trace"],
         "--trace /proc/gdn-parity-trace cannot be written: No such file or directory"),
    ],
)  # fmt: skip
def test_a_refusal_does_not_make_the_output_directory_even_for_a_moment(args, message, tmp_path,
                                                                        run_cli):  # fmt: skip
    """Before: --out (or harness-server's --trace) was made and removed again before these
    refusals, which the directory it sits in shows in its modification time; and --out's
    probe made it for a moment when --trace's failed after it (the probes now make nothing)."""
    parent = tmp_path / "parent"
    parent.mkdir()
    out = parent / "demo-out"
    before = parent.stat().st_mtime_ns
    with socket.create_server(("127.0.0.1", 0)) as taken:
        values = {"out": out, "tmp": tmp_path, "taken": taken.getsockname()[1]}
        assert_refused(run_cli(*[a.format(**values) for a in args]), message)
    assert list(parent.iterdir()) == [] and parent.stat().st_mtime_ns == before


@pytest.mark.parametrize(
    "args,message",
    [
        (["demo", "--out", "{tmp}/a-file"], "--out {tmp}/a-file exists and is not a directory"),
        (["harness-server", "--port", "{taken}"], "cannot listen on 127.0.0.1:{taken}"),
    ],
)
def test_a_refusal_of_the_large_model_on_cpu_is_one_line(args, message, tmp_path, run_cli):
    """The warning that the large model takes hours on CPU comes after the checks. Before: it
    came first, so a refusal was two lines."""
    (tmp_path / "a-file").write_text("keep me\n")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        values = {"tmp": tmp_path, "taken": taken.getsockname()[1]}
        proc = run_cli(*[a.format(**values) for a in args], "--size", "large")
        assert_refused(proc, message.format(**values))
    assert _files(tmp_path) == {"a-file": b"keep me\n"}


@pytest.mark.parametrize(
    "device,message",
    [
        ("cpu", "cost times GPU kernels: pass --device cuda"),
        # the test bed has no CUDA device. Before: this named --device cuda, already given
        # (or cost's default)
        ("cuda", "cost times GPU kernels, and torch finds no CUDA device here"),
    ],
)
def test_cost_refuses_the_interpreter_before_any_work(device, message, tmp_path, run_cli):
    proc = run_cli("cost", "--device", device, "--out", str(tmp_path / "out"))
    assert_refused(proc, message)
    assert list(tmp_path.iterdir()) == []


def test_cost_refuses_a_profile_of_eager_steps_naming_the_fix(tmp_path, run_cli):
    """``--profile`` profiles what a graph replays (capture mode); ``--no-graphs`` times eager
    steps outside it: refused at start-up, before any work."""
    proc = run_cli("cost", "--profile", "--no-graphs", "--out", str(tmp_path / "out"))
    assert_refused(proc, "--profile profiles the kernels a CUDA graph replays: drop --no-graphs")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args,message",
    [
        (["--variant", "nightly"], "argument --variant: invalid choice: 'nightly'"),
        (["--port", "70000"], "argument --port: '70000' is not in 0-65535"),
        (["--port", "http"], "argument --port: 'http' is not a port number"),
        (["--gamma", "0"], "argument --gamma: '0' must be at least 1"),
        (["--context-length", "1"], "argument --context-length: '1' must be at least 16"),
        # Before: an internal error (exit 70), a KV cache of 64 GB that could not be allocated.
        (
            ["--context-length", "1000000000"],
            "argument --context-length: '1000000000' must be at most 131072",
        ),
        (["--mode", "natural"], "argument --mode: invalid choice"),
    ],
)
def test_harness_server_refuses_bad_arguments(args, message, run_cli):
    assert_refused(run_cli("harness-server", *args), message)


@pytest.mark.parametrize(
    "args,option",
    [
        (["demo", "--gammas", "1,1000000000"], "--gammas: '1,1000000000': every item"),
        (["demo", "--natural-gamma", "1000000000"], "--natural-gamma: '1000000000'"),
        (["cost", "--gamma", "3,257"], "--gamma: '3,257': every item"),
        # on a port in use: were the option taken, the server would refuse that, not serve
        (["harness-server", "--gamma", "257", "--port", "{taken}"], "--gamma: '257'"),
    ],
)
def test_a_gamma_past_the_limit_is_refused_before_any_work(args, option, tmp_path, run_cli):
    """A verify round holds its gamma + 1 rows at once. Before: the demo took 10**9, started
    its workers, and each failed to allocate a KV cache of 64 GB, leaving its log."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        args = [a.format(taken=taken.getsockname()[1]) for a in args]
        proc = run_cli(*args, cwd=tmp_path)
    assert_refused(proc, f"argument {option} must be at most 256")
    assert list(tmp_path.iterdir()) == []


# --- the lead's stop check ------------------------------------------------------------

# The bad inputs the stop check runs in a temporary directory, which holds "garbage" (bytes
# that are no text) and "a-file" (a regular file).
STOP_CHECK = [
    ["trace-diff", "garbage", "garbage"],
    ["repro", "--base-url", "notaurl", "--spec-url", "http://127.0.0.1:9"],
    ["status", "missing"],
    ["tree", "a-file"],
    ["no-such-verb"],
    ["repro", "--base-url", "http://127.0.0.1:9", "--spec-url", "http://127.0.0.1:9",
     "--timeout", "1e12"],
    ["demo", "--gammas", "1000000000"],
    ["harness-server", "--context-length", "1000000000"],
]  # fmt: skip


@pytest.mark.parametrize("args", STOP_CHECK, ids=" ".join)
def test_the_stop_checks_bad_inputs_are_refused_on_one_line(args, tmp_path, run_cli):
    (tmp_path / "garbage").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "a-file").write_text("keep me\n")
    before = _files(tmp_path)
    assert_refused(run_cli(*args, cwd=tmp_path), "error: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "garbage"]
    assert _files(tmp_path) == before


# --- the queue verbs --------------------------------------------------------------


def test_tree_refuses_a_file(tmp_path, run_cli):
    a_file = tmp_path / "a-file"
    a_file.write_text("keep me\n")
    assert_refused(run_cli("tree", str(a_file)), "is a file, not a directory for the tree")
    assert a_file.read_text() == "keep me\n"


def test_tree_refuses_a_directory_it_cannot_make(tmp_path, run_cli):
    """Before: git's own message leaked as a second line."""
    assert_refused(
        run_cli("tree", "/proc/gdn-parity-tree"), "cannot make the tree /proc/gdn-parity-tree: "
    )
    a_file = tmp_path / "a-file"
    a_file.write_text("keep me\n")
    assert_refused(run_cli("tree", str(a_file / "tree")), f"cannot make the tree {a_file}/tree: ")
    assert _files(tmp_path) == {"a-file": b"keep me\n"}


def test_smoke_refuses_a_directory_that_is_not_a_tree(tmp_path, run_cli):
    """A typo'd DIR is refused, not made into a tree (the cache's tree is made when missing)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    for where in (tmp_path / "typo", empty):
        assert_refused(
            run_cli("smoke", str(where)),
            f"{where} is not a tree: make one with `gdn-parity tree {where}`, or leave DIR out "
            "to use the cache's tree",
        )
    assert list(tmp_path.iterdir()) == [empty] and list(empty.iterdir()) == []


@pytest.mark.needs_tree
@pytest.mark.slow  # a tree is made and its modules imported
def test_smoke_suggests_a_tree_command_that_works_where_parents_are_missing(
    scratch_cache, tmp_path, run_cli
):
    """`gdn-parity tree DIR`, as smoke suggests for a DIR whose parents are missing too,
    makes them, and smoke then checks the tree."""
    where = tmp_path / "missing" / "parents" / "tree"
    proc = run_cli("smoke", str(where))
    assert_refused(proc, f"make one with `gdn-parity tree {where}`")
    made = run_cli("tree", str(where))
    assert made.returncode == 0, made.stderr
    proc = run_cli("smoke", str(where))
    assert proc.returncode == 0 and f"patched modules import from {where}:" in proc.stdout, (
        proc.stderr
    )


def test_smoke_on_a_directory_tree_would_refuse_suggests_a_new_one(tmp_path, run_cli):
    """Before: a non-empty directory or a file was told `gdn-parity tree DIR`, which refuses
    both."""
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.txt").write_text("keep me\n")
    a_file = tmp_path / "a-file"
    a_file.write_text("keep me\n")
    for where in (full, a_file):
        assert_refused(
            run_cli("smoke", str(where)),
            f"{where} is not a tree: make one with `gdn-parity tree NEWDIR`, or leave DIR out",
        )
    assert _files(tmp_path) == {"a-file": b"keep me\n", "full/notes.txt": b"keep me\n"}


def test_a_refused_verb_leaves_no_cache_behind(tmp_path, run_cli):
    """Before: the cache directory (and its .lock) was made before the refusal."""
    cache = tmp_path / "new" / "cache"
    env = {k: v for k, v in os.environ.items() if k != "GDN_PARITY_TREE"}
    env["GDN_PARITY_CACHE"] = str(cache)  # export's tree is then the cache's, not yet made
    patches = tmp_path / "patches"  # a copy, so that nothing could write the real series
    shutil.copytree(Path(__file__).resolve().parents[2] / "patches", patches)
    a_file = tmp_path / "a-file"
    a_file.write_text("keep me\n")
    before = _files(tmp_path)
    proc = run_cli("--patches", str(patches), "export", env=env)
    assert_refused(proc, f"{cache}/tree is not a git tree")
    assert_refused(run_cli("tree", str(a_file), env=env), "is a file, not a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "patches"], "no cache"
    assert _files(tmp_path) == before


def test_export_refuses_a_directory_that_is_no_tree(tmp_path, run_cli):
    patches = tmp_path / "patches"
    root = Path(__file__).resolve().parents[2]
    for source in (root / "patches").iterdir():
        (patches / source.name).parent.mkdir(exist_ok=True)
        (patches / source.name).write_bytes(source.read_bytes())
    before = _files(patches)
    proc = run_cli("--patches", str(patches), "export", "--tree", str(tmp_path))
    assert_refused(proc, "is not a git tree: make one with `gdn-parity tree DIR`")
    assert _files(patches) == before


def _git_repo(directory: Path) -> Path:
    """A git repository with one commit, as a user's project would be."""
    directory.mkdir()
    (directory / "README").write_text("another project\n")
    for args in (["init", "-q"], ["add", "README"], ["commit", "-qm", "start"]):
        subprocess.run(
            ["git", "-C", str(directory), "-c", "user.name=u", "-c", "user.email=u@u", *args],
            check=True,
        )
    return directory


@pytest.mark.parametrize("kind", ["empty", "git-repo"])
def test_patches_without_a_series_is_named_not_told_to_pass_patches(kind, tmp_path, run_cli):
    """Before: "no series file at DIR/series: pass --patches DIR", to a user who had."""
    where = tmp_path / kind
    if kind == "empty":
        where.mkdir()
    else:
        _git_repo(where)
    proc = run_cli("--patches", str(where), "check")
    assert_refused(
        proc,
        f"gdn-parity check: error: --patches {where} has no series file, so it is not a "
        "gdn-parity patches/ directory: name the patches/ directory of a gdn-parity checkout",
    )


def test_gdn_parity_patches_without_a_series_names_the_variable(tmp_path, run_cli):
    env = {**os.environ, "GDN_PARITY_PATCHES": str(tmp_path)}
    assert_refused(
        run_cli("check", env=env),
        f"no series file at {tmp_path}/series: GDN_PARITY_PATCHES must name a gdn-parity "
        "patches/ directory, or be unset",
    )


def test_a_series_file_that_is_not_text_is_refused(tmp_path, run_cli):
    """Before: a UnicodeDecodeError's traceback and exit status 1, a verdict's."""
    (tmp_path / "series").write_bytes(b"# base: sglang==0.5.23\xff\n")
    assert_refused(
        run_cli("--patches", str(tmp_path), "check"),
        f"gdn-parity check: error: {tmp_path}/series is not a series file: it is not UTF-8 text",
    )


def test_smoke_and_tree_leave_another_git_repository_alone_and_say_what_to_do(tmp_path, run_cli):
    """Before: "... did not make; choose another directory", to smoke, which makes nothing."""
    repo = _git_repo(tmp_path / "project")
    before = _files(repo)
    assert_refused(
        run_cli("smoke", str(repo)),
        f"gdn-parity smoke: error: {repo} is a git repository that `gdn-parity tree` did not "
        "make, and smoke checks only such trees: make one with `gdn-parity tree NEWDIR`, or "
        "leave DIR out to use the cache's tree",
    )
    assert_refused(
        run_cli("tree", str(repo)),
        f"gdn-parity tree: error: {repo} is a git repository that gdn-parity did not make (it "
        "is left alone): name a new or empty directory for the tree",
    )
    assert _files(repo) == before


def test_a_missing_series_is_refused_only_by_verbs_that_need_it(tmp_path, good_trace, run_cli):
    nowhere = str(tmp_path / "nowhere")
    assert_refused(
        run_cli("--patches", nowhere, "tree", str(tmp_path / "t")),
        f"--patches {nowhere} has no series file",
    )
    proc = run_cli("--patches", nowhere, "trace-diff", str(good_trace), str(good_trace))
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("args", [[], ["frobnicate"]])
def test_a_missing_or_unknown_verb_is_refused(args, run_cli):
    assert_refused(run_cli(*args), "gdn-parity: error:")


@pytest.mark.parametrize("verb", VERBS)
def test_a_usage_error_points_at_the_verbs_own_help(verb, run_cli):
    """argparse hands a verb's unknown arguments to the top level, whose help is the wrong one."""
    assert_refused(
        run_cli(verb, *REQUIRED.get(verb, []), "--frobnicate"),
        f"gdn-parity {verb}: error: unrecognized arguments: --frobnicate "
        f"(see gdn-parity {verb} --help)",
    )


# A bad input of each verb that only the verb can see, after the command line is parsed.
REFUSED_BY_THE_VERB = {
    "apply": (["{tmp}"], "is not an installed sglang package"),
    "status": (["{tmp}"], "is not an installed sglang package"),
    "check": (["--patches", "{tmp}/nowhere"], "/nowhere has no series file, so it is not"),
    "export": (["--patches", "{tmp}/nowhere"], "/nowhere has no series file, so it is not"),
    "tree": (["{tmp}/a-file"], "is a file, not a directory for the tree"),
    "smoke": (["{tmp}/typo"], "is not a tree"),
    "demo": (["--stack", "rowwise", "--batch", "2"], "the row-wise stack serves one request"),
    "cost": (["--device", "cpu"], "cost times GPU kernels"),
    "harness-server": (["--trace", "{tmp}/a-file"], "exists and is not a directory"),
    "model-dir": (["tiny", "{tmp}/a-file"], "exists and is not an empty directory"),
    "repro": (["--base-url", "ftp://h", "--spec-url", "http://h:1"], "is not an http(s) URL"),
    "trace-diff": (["{tmp}/nowhere", "{tmp}/nowhere"], "cannot read"),
    "server-parity": (["{tmp}/nowhere.toml", "--out", "{tmp}/out"], "cannot read"),
    "server-cost": (["{tmp}/nowhere.toml", "--out", "{tmp}/out"], "cannot read"),
}


def test_the_table_has_a_bad_input_of_every_verb():
    assert sorted(REFUSED_BY_THE_VERB) == VERBS


@pytest.mark.parametrize("verb", sorted(REFUSED_BY_THE_VERB))
def test_an_error_found_by_the_verb_names_the_verb(verb, tmp_path, run_cli):
    """As argparse's own errors do; before: ``gdn-parity: error: ...`` whatever the verb."""
    (tmp_path / "a-file").write_text("keep me\n")
    args, message = REFUSED_BY_THE_VERB[verb]
    args = [a.format(tmp=tmp_path) for a in args]
    if args[0] == "--patches":
        args = [*args[:2], verb]
    else:
        args = [verb, *args]
    proc = run_cli(*args)
    assert_refused(proc, message)
    assert proc.stderr.startswith(f"gdn-parity {verb}: error: "), proc.stderr
    assert "--help" not in proc.stderr  # the command line was right: its help has no fix
    assert _files(tmp_path) == {"a-file": b"keep me\n"}


def test_no_option_takes_argparses_own_number_types():
    """argparse's ``int`` and ``float`` say "invalid int value: 'x'" where the options of
    cli/options.py say "'x' is not an integer". Before: --seed did."""
    parsers = [build_parser(), *_verb_parsers().values()]
    bare = [
        f"{parser.prog} {'/'.join(action.option_strings) or action.dest}"
        for parser in parsers
        for action in parser._actions
        if action.type in (int, float)
    ]
    assert bare == []


@pytest.mark.parametrize("verb", VERBS)
def test_an_unknown_option_is_named_before_missing_arguments(verb, run_cli):
    """``status --bogus`` is a typo, not a call without a target."""
    assert_refused(
        run_cli(verb, "--frobnicate"),
        f"gdn-parity {verb}: error: unrecognized arguments: --frobnicate "
        f"(see gdn-parity {verb} --help)",
    )


@pytest.mark.parametrize(
    "args", [["--frobnicate", "check"], ["--frobnicate"], ["--frobnicate", "status"]]
)
def test_an_unknown_option_before_the_verb_is_the_top_levels(args, run_cli):
    assert_refused(
        run_cli(*args),
        "gdn-parity: error: unrecognized arguments: --frobnicate (see gdn-parity --help)",
    )


@pytest.mark.parametrize(
    "args,option",
    [
        (["status", ""], "target"),
        (["apply", ""], "target"),
        (["status", "--python", ""], "--python"),
        (["apply", "--python", ""], "--python"),
        (["tree", ""], "dir"),
        (["smoke", ""], "dir"),
        (["export", "--tree", ""], "--tree"),
        (["--patches", "", "check"], "--patches"),
        (["trace-diff", "", "x"], "base"),
        (["trace-diff", "x", ""], "spec"),
        (["repro", "--base-url", "http://h:1", "--spec-url", "http://h:1", "--input-ids", ""],
         "--input-ids"),
        # a second bad argument after it: without the check the verb stops there, not at work
        (["demo", "--out", "", "--jobs", "0"], "--out"),
        (["demo", "--trace", "", "--jobs", "0"], "--trace"),
        (["cost", "--out", "", "--batch", "0"], "--out"),
        (["harness-server", "--trace", "", "--port", "70000"], "--trace"),
        (["server-parity", "", "--out", "x"], "plan"),
        (["server-parity", "x", "--out", "", "--set", "1=2"], "--out"),
        (["server-cost", "", "--out", "x"], "plan"),
        (["server-cost", "x", "--out", "", "--set", "1=2"], "--out"),
    ],
)  # fmt: skip
def test_an_empty_path_is_refused(args, option, tmp_path, run_cli):
    """An empty path would mean the current directory (or, for some, the default)."""
    if args[0] == "export":  # a copy of the series, so that nothing could write the real one
        shutil.copytree(Path(__file__).resolve().parents[2] / "patches", tmp_path / "patches")
        args = ["--patches", str(tmp_path / "patches"), *args]
    before = _files(tmp_path)
    verb = next(a for a in args if a in VERBS)
    assert_refused(
        run_cli(*args),
        f"gdn-parity{' ' + verb if option != '--patches' else ''}: error: argument {option}: "
        "'' is an empty path (the current directory is .)",
    )
    assert _files(tmp_path) == before


# --- status and apply: the target is checked before anything else ------------------


def _fake_package(root: Path, version: str) -> Path:
    package = root / "sglang"
    package.mkdir()
    (package / "_version.py").write_text(f"__version__ = version = '{version}'\n")
    return package


# _version.py files other than the wheel's: what each says (the version is read, not run).
VERSION_FILES = {
    "other-bare-version": '__version__ = "0.5.24"\n',
    "no-version": "VERSION = '0.5.23'\n",
    "computed-version": "__version__ = '0.5.23'\n__version__ = read_version()\n",
    "not-python": "__version__ = '0.5.23\n",
}


@pytest.mark.parametrize("verb", ["status", "apply"])
@pytest.mark.parametrize(
    "target,message",
    [
        ("missing", "does not exist"),
        ("a-file", "is not a directory: name an sglang checkout or package"),
        ("empty-dir", "is not an installed sglang package (no _version.py)"),
        ("other-version", "is sglang 0.5.24; the series is for sglang 0.5.23"),
        ("other-bare-version", "is sglang 0.5.24; the series is for sglang 0.5.23"),
        ("no-version", "/_version.py assigns nothing to __version__ (sglang's says "),
        (
            "computed-version",
            "/_version.py computes __version__ (its last assignment is not a "
            "string literal), so its sglang version cannot be read without running it",
        ),
        ("not-python", "/_version.py is not Python source, so it names no sglang version: "),
        ("git-repo", "has no python/sglang/: not an sglang checkout"),
    ],
)
def test_a_target_that_is_not_sglang_0523_is_refused(verb, target, message, tmp_path, run_cli):
    root = tmp_path / "root"
    root.mkdir()
    path = root / target
    if target == "a-file":
        path.write_text("x\n")
    elif target == "empty-dir":
        path.mkdir()
    elif target == "other-version":
        path = _fake_package(root, "0.5.24")
    elif target in VERSION_FILES:
        path = root / "sglang"
        path.mkdir()
        (path / "_version.py").write_text(VERSION_FILES[target])
    elif target == "git-repo":
        path.mkdir()
        subprocess.run(["git", "init", "-q", str(path)], check=True)
    before = _files(root)
    assert_refused(run_cli(verb, str(path)), message)
    assert _files(root) == before


@pytest.mark.parametrize("verb", ["status", "apply"])
def test_another_python_without_sglang_is_refused(verb, tmp_path, run_cli):
    assert_refused(
        run_cli(verb, "--python", sys.executable),
        f"no sglang package is installed for {sys.executable}: name the Python of the "
        "environment that has sglang 0.5.23 (the server's) with --python",
    )
    assert_refused(run_cli(verb, "--python", str(tmp_path / "python")), "cannot run")
    assert_refused(
        run_cli(verb, "--python", "/bin/false"),
        "--python /bin/false failed to look for sglang: it exited with status 1 and printed "
        "nothing",
    )
    # Programs that exit 0 without running the probe (echo prints it back) are no Python.
    for program in ("/bin/true", "/bin/echo"):
        assert_refused(
            run_cli(verb, "--python", program), f"--python {program} is not a Python interpreter"
        )
    failing = tmp_path / "failing-python"
    failing.write_text("#!/bin/sh\necho first >&2\necho 'ImportError: no site' >&2\nexit 3\n")
    failing.chmod(0o755)
    assert_refused(
        run_cli(verb, "--python", str(failing)),
        f"--python {failing} failed to look for sglang: ImportError: no site",
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    assert_refused(
        run_cli(verb, "--site-packages", env=env),
        "no sglang package is installed for this Python: name the Python of the environment "
        "that has sglang 0.5.23 (the server's) with --python",
    )


@pytest.mark.parametrize("verb", ["status", "apply"])
def test_python_is_found_as_a_shell_finds_it(verb, tmp_path, run_cli):
    """A relative path is from the caller's directory, a bare name is looked up on PATH. Before:
    the interpreter ran from /, so ``--python venv/bin/python`` said "cannot run ... No such
    file or directory" for an interpreter that was there."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)  # a Python without sglang
    found = f"no sglang package is installed for {bin_dir / 'python'}"
    for name in ("venv/bin/python", "./venv/bin/python"):
        assert_refused(run_cli(verb, "--python", name, cwd=tmp_path), found)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    assert_refused(run_cli(verb, "--python", "python", env=env, cwd=tmp_path / "venv"), found)
    assert_refused(
        run_cli(verb, "--python", "gdn-parity-no-such-python", cwd=tmp_path),
        "argument --python: 'gdn-parity-no-such-python' is not a program on PATH (to run a file "
        "in this directory, write ./gdn-parity-no-such-python)",
    )


@pytest.mark.parametrize("verb", ["status", "apply"])
def test_two_targets_at_once_are_refused(verb, tmp_path, run_cli):
    proc = run_cli(verb, str(tmp_path), "--python", sys.executable)
    assert_refused(proc, "not allowed with argument")
    proc = run_cli(verb)
    assert_refused(proc, "one of the arguments target --python --site-packages is required")
    assert proc.stderr.endswith(f"(see gdn-parity {verb} --help)\n")


def test_tree_leaves_a_git_repository_without_commits_alone(tmp_path, run_cli):
    """Before: git's own text, "git rev-parse HEAD failed ... ambiguous argument 'HEAD'"."""
    repo = tmp_path / "new-project"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    before = _files(repo)
    assert_refused(
        run_cli("tree", str(repo)),
        f"gdn-parity tree: error: {repo} is a git repository that gdn-parity did not make (it "
        "is left alone): name a new or empty directory for the tree",
    )
    assert _files(repo) == before


def _pinned_wrong(series, tmp_path: Path, old: str, new: str) -> tuple[Path, dict[str, str]]:
    """A copy of the series whose pin ``old`` reads ``new``, and the environment of a cache
    of the test's own (its tree is the cache's tree/) that holds the session cache's pinned
    wheel and base (links)."""
    patches = tmp_path / "patches"
    shutil.copytree(series.directory, patches)
    text = (patches / "series").read_text()
    assert old in text
    (patches / "series").write_text(text.replace(old, new, 1))
    cache = scratch_cache_in(series, tmp_path)
    (cache / "wheels").mkdir()
    (cache / "wheels" / series.wheel_name).symlink_to(fetch_wheel(series))
    env = {k: v for k, v in os.environ.items() if k != "GDN_PARITY_TREE"}
    return patches, {**env, "GDN_PARITY_CACHE": str(cache)}


@pytest.mark.needs_tree
def test_a_wheel_that_does_not_match_its_pin_names_both_causes(series, tmp_path, run_cli):
    """Before: "... but the series pins X. Delete it and retry.", to a user whose series'
    pin was what was wrong (deleting the wheel only downloads it again)."""
    wrong = "f" * 64
    patches, env = _pinned_wrong(series, tmp_path, series.wheel_sha256, wrong)
    wheel = tmp_path / "cache" / "wheels" / series.wheel_name
    assert_refused(
        run_cli("--patches", str(patches), "tree", str(tmp_path / "tree"), env=env),
        f"gdn-parity tree: error: {wheel} has sha256 {series.wheel_sha256}, but "
        f"{patches}/series pins {wrong}: if the wheel is corrupt, delete it and retry; if the "
        "series' base-wheel-sha256 is wrong, correct it",
    )
    assert not (tmp_path / "tree").exists()


@pytest.mark.needs_tree
@pytest.mark.slow  # the base of version 0.5.99 is laid out, to be refused, twice
@pytest.mark.parametrize("pin", ["version", "sha256"])
def test_smoke_on_a_tree_it_reuses_refuses_a_series_whose_pins_are_wrong(
    pin, series, tmp_path, run_cli
):
    """Before: smoke brought the cache's tree up to date on its own base, never checking
    the pins, and exited 0, where `tree DIR` and `check` refused the same series."""
    patches, env = _pinned_wrong(series, tmp_path, series.wheel_sha256, series.wheel_sha256)
    made = run_cli("--patches", str(patches), "tree", env=env)  # the cache's tree, good pins
    assert made.returncode == 0, made.stderr
    old, new = {
        "version": (f"sglang=={series.version}", "sglang==0.5.99"),
        "sha256": (series.wheel_sha256, "f" * 64),
    }[pin]
    (patches / "series").write_text((patches / "series").read_text().replace(old, new, 1))
    fragment = {"version": "but the series pins", "sha256": "if the wheel is corrupt"}[pin]
    for verb in ("smoke", "tree"):
        proc = run_cli("--patches", str(patches), verb, env=env)
        assert proc.returncode == 2, (verb, proc.stdout, proc.stderr)
        *notes, error = proc.stderr.splitlines()
        assert all(is_note(line, verb) for line in notes), proc.stderr
        assert error.startswith(f"gdn-parity {verb}: error: ") and fragment in error, error


@pytest.mark.needs_tree
@pytest.mark.slow  # the base is laid out again once
@pytest.mark.parametrize("damage", ["not-a-repository", "no-base-branch"])
def test_a_damaged_base_in_the_cache_is_named_with_what_to_do(damage, series, tmp_path, run_cli):
    """Before: "error: /tmp/.../base-uytz7pk_: Directory not empty", a temporary directory's
    name and no advice (the base laid out anew could not replace the damaged one)."""
    cache = tmp_path / "cache"
    (cache / "wheels").mkdir(parents=True)
    (cache / "wheels" / series.wheel_name).symlink_to(fetch_wheel(series))
    base = cache / f"base-{series.version}-{series.wheel_sha256[:12]}"
    (base / "python").mkdir(parents=True)
    (base / "python" / "half-written.py").write_text("")
    if damage == "no-base-branch":
        subprocess.run(["git", "init", "-q", str(base)], check=True)
    env = {**os.environ, "GDN_PARITY_CACHE": str(cache)}
    before = _files(cache)
    proc = run_cli("tree", str(tmp_path / "tree"), env=env)
    if damage == "not-a-repository":
        assert_refused(
            proc,
            f"gdn-parity tree: error: {base} is not a git repository holding the base (an "
            "interrupted or damaged cache): delete it and retry, and gdn-parity lays the base "
            "out again",
        )
        assert _files(cache) == {**before, ".lock": b""} and not (tmp_path / "tree").exists()
    else:  # a repository whose base branch is not the pinned commit is laid out again
        assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in cache.iterdir()) == sorted(["wheels", base.name, ".lock"])
