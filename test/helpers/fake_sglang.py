"""A stand-in for ``python -m sglang.launch_server``: copied into a temporary tree as
``python/sglang/launch_server.py``, it serves sglang's ``GET /health_generate``,
``POST /generate`` (``output_ids``, ``meta_info``), ``POST /flush_cache`` and
``GET /server_info`` on the port it is given.

Its output for a prompt is a fixed function of the prompt (``tokens``), the same on a Base
and a speculative server unless the environment says otherwise:

- ``FAKE_SGLANG_NAME``: the name in its records;
- ``FAKE_SGLANG_RECORD=<dir>``: append one JSON line per event (start, healthy, flush,
  request, exit) to ``<dir>/events.jsonl``;
- ``FAKE_SGLANG_DIVERGE=rid@pos;...``: a speculative server changes that token of that rid;
- ``FAKE_SGLANG_BATCH_DIVERGE=rid@pos;...``: a speculative server changes that token of
  that rid when another request was in flight with it (its output depends on its batch);
- ``FAKE_SGLANG_STATE_DIVERGE=rid@pos;...``: a speculative server's traced states from
  that position on differ (its tokens do not);
- ``FAKE_SGLANG_FAIL=1``: print 50 lines and exit 3 before serving;
- ``FAKE_SGLANG_NEVER_HEALTHY=1``: ``/health_generate`` answers 503 forever;
- ``FAKE_SGLANG_IGNORE_SIGTERM=1``: it and its child ignore SIGTERM;
- ``FAKE_SGLANG_GATHER=N``: each request waits (up to 5 s) until N are in flight;
- ``FAKE_SGLANG_HOLD=S``: each request waits S seconds before it answers;
- ``FAKE_SGLANG_STEP_MS=P,S``: ``meta_info`` reports a prefill of P ms and S ms a step:
  ``e2e_latency`` = (P + steps x S) / 1000 for steps = the tokens after the first, over
  ``SGLANG_SIMULATE_ACC_LEN`` (rounded up) on a speculative server, which reports them as
  ``spec_verify_ct``; without it, ``e2e_latency`` is the request's wall time and
  ``spec_verify_ct`` the tokens;
- ``FAKE_SGLANG_RETRACT=rid;...``: those requests report ``num_retractions`` 1;
- ``FAKE_SGLANG_MAX_RUNNING=N``, ``FAKE_SGLANG_TOKEN_CAPACITY=T``: what ``/server_info``
  says the server holds (default 1024 requests, 10**9 tokens).

Like sglang, it starts a child process that dies with its parent (``PR_SET_PDEATHSIG``), and
with ``SGLANG_GDN_STATE_TRACE=<dir>`` writes a GDN state trace in 0001's format: Base
``decode_input`` records, speculative ``verify_input`` and ``post_commit`` records, two
layers, one state per position; ``SGLANG_GDN_STATE_TRACE_RIDS`` restricts it to some rids.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VOCAB = 248320
LAYERS = (0, 1)
CHILD = (
    "import ctypes, signal, time\n"
    "ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)\n"
    "while True: time.sleep(60)\n"
)


def tokens(prompt: list[int], count: int) -> list[int]:
    """The fake model's greedy output: a hash of the prompt and the index, per token."""
    key = ",".join(map(str, prompt))
    return [
        int.from_bytes(hashlib.sha256(f"{key}|{k}".encode()).digest()[:4], "big") % VOCAB
        for k in range(count)
    ]


def state_sha(prompt: list[int], pos: int, layer: int, salt: str = "") -> str:
    return hashlib.sha256(f"{prompt}|{pos}|{layer}|{salt}".encode()).hexdigest()


def _rules(name: str) -> dict[str, int]:
    rules = {}
    for rule in filter(None, os.environ.get(name, "").split(";")):
        rid, pos = rule.rsplit("@", 1)
        rules[rid] = int(pos)
    return rules


def record(event: str, **fields) -> None:
    directory = os.environ.get("FAKE_SGLANG_RECORD")
    if not directory:
        return
    line = json.dumps(
        {"event": event, "server": os.environ.get("FAKE_SGLANG_NAME"), "pid": os.getpid(),
         "time": time.time(), **fields}
    )  # fmt: skip
    fd = os.open(os.path.join(directory, "events.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


class Trace:
    def __init__(self, directory: str, speculative: bool) -> None:
        os.makedirs(directory, exist_ok=True)
        n = 0
        while True:
            suffix = "" if n == 0 else f".{n}"
            path = os.path.join(directory, f"gdn_state_trace.dp0.tp0.pp0{suffix}.jsonl")
            try:
                self.file = open(path, "x")
                break
            except FileExistsError:
                n += 1
        self.speculative = speculative
        self.lock = threading.Lock()
        self.write({"type": "header", "format": "sglang-gdn-state-trace", "version": 1})

    def write(self, record: dict) -> None:
        self.file.write(json.dumps(record) + "\n")

    def state(self, checkpoint, rid, pos, layer, sha, **extra) -> None:
        digest = {"sha256": sha, "dtype": "bfloat16", "shape": [1], "absmax": 1.0, "l2": 1.0}
        self.write({"type": "state", "checkpoint": checkpoint, "rid": rid, "pos": pos,
                    "layer": layer, "ssm": digest, "conv": dict(digest), **extra})  # fmt: skip

    def request(self, rid: str, prompt: list[int], output: list[int], differ_from: int | None):
        def sha(pos: int, layer: int) -> str:
            salt = "x" if differ_from is not None and pos >= differ_from else ""
            return state_sha(prompt, pos, layer, salt)

        rids = os.environ.get("SGLANG_GDN_STATE_TRACE_RIDS")
        if rids and rid not in rids.split(","):
            return
        with self.lock:
            for k, token in enumerate(output):
                p = len(prompt) + k
                for layer in LAYERS:
                    if self.speculative:
                        self.state("verify_input", rid, p, layer, sha(p, layer), token=token,
                                   token_pos=p)  # fmt: skip
                        self.state("post_commit", rid, p + 1, layer, sha(p + 1, layer))
                    else:
                        self.state("decode_input", rid, p, layer, sha(p, layer), token=token,
                                   token_pos=p)  # fmt: skip
            self.file.flush()


class Server:
    def __init__(self, args: argparse.Namespace) -> None:
        self.speculative = args.speculative_algorithm is not None
        self.ready_at = time.monotonic() + 0.05
        self.healthy_seen = False
        self.in_flight = 0
        self.peak: dict[str, int] = {}  # by rid in flight: the most in flight with it
        self.gathered = False
        self.condition = threading.Condition()
        self.diverge = _rules("FAKE_SGLANG_DIVERGE")
        self.batch_diverge = _rules("FAKE_SGLANG_BATCH_DIVERGE")
        self.state_diverge = _rules("FAKE_SGLANG_STATE_DIVERGE")
        trace = os.environ.get("SGLANG_GDN_STATE_TRACE")
        self.trace = Trace(trace, self.speculative) if trace else None

    def healthy(self) -> bool:
        if os.environ.get("FAKE_SGLANG_NEVER_HEALTHY") or time.monotonic() < self.ready_at:
            return False
        if not self.healthy_seen:
            self.healthy_seen = True
            record("healthy")
        return True

    def generate(self, body: dict) -> dict:
        params = body["sampling_params"]
        assert body["stream"] is False and isinstance(body["rid"], str)
        assert params["temperature"] == 0.0 and params["ignore_eos"] is True
        prompt, rid, count = body["input_ids"], body["rid"], params["max_new_tokens"]
        began = time.monotonic()
        with self.condition:
            self.in_flight += 1
            self.peak[rid] = 0
            for other in self.peak:
                self.peak[other] = max(self.peak[other], self.in_flight)
            record("request", rid=rid, input_ids=prompt, in_flight=self.in_flight,
                   max_new_tokens=count)  # fmt: skip
            self.condition.notify_all()
            if self.in_flight >= int(os.environ.get("FAKE_SGLANG_GATHER", "0")):
                self.gathered = True  # until the batch is done: the others go too
            if not self.condition.wait_for(lambda: self.gathered, timeout=5):
                record("gather-timeout", rid=rid)
        time.sleep(float(os.environ.get("FAKE_SGLANG_HOLD", "0")))
        with self.condition:
            company = self.peak.pop(rid) > 1
        output = tokens(prompt, count)
        meta = {"id": rid, "prompt_tokens": len(prompt), "completion_tokens": count,
                "num_retractions": int(rid in os.environ.get("FAKE_SGLANG_RETRACT", "").split(";")),
                "e2e_latency": time.monotonic() - began}  # fmt: skip
        steps = count
        if os.environ.get("FAKE_SGLANG_STEP_MS"):
            prefill_ms, step_ms = map(float, os.environ["FAKE_SGLANG_STEP_MS"].split(","))
            accept = (
                float(os.environ.get("SGLANG_SIMULATE_ACC_LEN", "1")) if self.speculative else 1
            )
            steps = math.ceil((count - 1) / accept)
            meta["e2e_latency"] = (prefill_ms + steps * step_ms) / 1e3
        if self.speculative:
            if rid in self.diverge:
                output[self.diverge[rid]] = (output[self.diverge[rid]] + 1) % VOCAB
            if company and rid in self.batch_diverge:
                pos = self.batch_diverge[rid]
                output[pos] = (output[pos] + 1) % VOCAB
            meta.update(spec_verify_ct=steps, spec_accept_rate=0.0, spec_accept_length=1.0)
        if self.trace is not None:
            self.trace.request(
                rid, prompt, output, self.state_diverge.get(rid) if self.speculative else None
            )
        with self.condition:
            self.in_flight -= 1
            self.gathered = self.in_flight > 0
        return {"text": "", "output_ids": output, "meta_info": meta}


def handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args) -> None:
            print(format % args, flush=True)

        def answer(self, status: int, body: dict | None = None) -> None:
            data = json.dumps(body or {}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/health_generate":
                self.answer(200 if server.healthy() else 503)
            elif self.path == "/server_info":
                record("server_info")
                state = {
                    "effective_max_running_requests_per_dp": int(
                        os.environ.get("FAKE_SGLANG_MAX_RUNNING", "1024")
                    ),
                    "memory_usage": {
                        "token_capacity": int(os.environ.get("FAKE_SGLANG_TOKEN_CAPACITY", 10**9))
                    },
                }
                self.answer(200, {"internal_states": [state], "version": "fake"})
            else:
                self.answer(404)

        def do_POST(self) -> None:
            path, _, query = self.path.partition("?")
            if path == "/flush_cache":
                record("flush", in_flight=server.in_flight, query=query)
                self.answer(400 if server.in_flight else 200)
                return
            if path != "/generate":
                self.answer(404)
                return
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            try:
                self.answer(200, server.generate(body))
            except (AssertionError, KeyError) as exc:
                self.answer(400, {"error": repr(exc)})

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--speculative-algorithm")
    args, _ = parser.parse_known_args()
    if os.environ.get("FAKE_SGLANG_IGNORE_SIGTERM"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: (record("exit"), os._exit(0)))
    child = subprocess.Popen([sys.executable, "-c", CHILD])
    record("start", argv=sys.argv[1:], child=child.pid,
           env={k: v for k, v in os.environ.items() if k.startswith(("SGLANG_", "PYTHONPATH"))},
           cwd=os.getcwd())  # fmt: skip
    for i in range(50):
        print(f"fake sglang: loading step {i}", flush=True)
    if os.environ.get("FAKE_SGLANG_FAIL"):
        print("RuntimeError: fake start failure", flush=True)
        record("exit")
        sys.exit(3)
    server = Server(args)
    ThreadingHTTPServer((args.host, args.port), handler(server)).serve_forever()


if __name__ == "__main__":
    main()
