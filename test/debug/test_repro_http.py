"""gdn-parity repro over real HTTP: harness servers speaking sglang's /generate, and bad servers.

The harness servers run the drift harness's model (the real kernels of one
numerics variant) behind sglang's request and response contract; the oracle
for what they must answer is the demo's own worker run of the same request.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
import urllib.request
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gdn_parity.debug.issue35150 import INPUT_IDS
from gdn_parity.debug.sglang_client import flush_cache, greedy_payload
from gdn_parity.drift.run.modes import ModeKind
from gdn_parity.errors import GdnParityError
from helpers.cli import assert_refused


def _sha(ids: list[int]) -> str:
    """How sglang#35150 hashes token ids."""
    return hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()


def test_the_embedded_request_is_the_issues():
    assert len(INPUT_IDS) == 24
    assert _sha(INPUT_IDS) == "f3d5baaf2ddb361d0d9fbff4add8071e24718908f76ae350ced01927dd87fcd0"


@contextmanager
def _harness_server(*args: str):
    proc = subprocess.Popen(
        [sys.executable, "-m", "gdn_parity.cli", "harness-server", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert "listening on http://" in line, f"the server did not start: {line!r}"
        yield line.split("listening on ")[1].strip()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def legacy_servers(series, tmp_path_factory):
    trace = tmp_path_factory.mktemp("server-traces")
    common = ["--variant", "0.5.23", "--trace"]
    with (
        _harness_server(*common, str(trace / "base"), "--mode", "base") as base,
        _harness_server(*common, str(trace / "spec"), "--mode", "forced-reject") as spec,
    ):
        yield base, spec, trace


def test_the_payload_is_a_sglang_generate_request(sglang_tree):
    from sglang.api.v1.api_types import GenerateRequest

    request = GenerateRequest.from_json_value(greedy_payload(INPUT_IDS, 96, "r-0"))
    params = request.sampling_params
    assert request.input_ids == list(INPUT_IDS) and request.rid == "r-0"
    assert request.stream is False
    assert (params.temperature, params.top_p, params.top_k) == (0.0, 1.0, -1)
    assert (params.max_new_tokens, params.ignore_eos) == (96, True)


def test_repro_against_0523_servers_reports_what_the_harness_computes(
    legacy_servers, legacy_run, run_cli
):
    base_url, spec_url, trace = legacy_servers
    tokens = len(legacy_run.base.tokens)
    proc = run_cli(
        "repro", "--base-url", base_url, "--spec-url", spec_url, "--max-new-tokens", str(tokens)
    )  # fmt: skip
    forced = legacy_run.mode(ModeKind.FORCED_REJECT)
    base_tokens, spec_tokens = legacy_run.base.tokens, forced.tokens
    out = proc.stdout
    assert "sglang#35150's request" in out
    assert f"output sha256 {_sha(base_tokens)}" in out
    assert f"output sha256 {_sha(spec_tokens)}" in out
    pairs = enumerate(zip(base_tokens, spec_tokens, strict=True))
    index = next((i for i, (x, y) in pairs if x != y), None)
    if index is None:
        assert proc.returncode == 0 and "identical" in out
    else:
        assert proc.returncode == 1, proc.stderr
        assert (
            f"first divergence: output index {index}: base {base_tokens[index]}, "
            f"spec {spec_tokens[index]}"
        ) in out
    rounds = tokens - 1
    assert "spec_accept_rate=0.0 " in out
    assert f"spec_verify_ct={rounds} spec_correct_drafts_histogram=[{rounds}]" in out

    # The servers' traces localize what the demo's traces localize.
    diff = run_cli(
        "trace-diff",
        str(trace / "base" / "gdn_state_trace.tp0.pp0.jsonl"),
        str(trace / "spec" / "gdn_state_trace.tp0.pp0.jsonl"),
    )
    assert diff.returncode == 1
    expected = run_cli("trace-diff", legacy_run.traces["base"], legacy_run.traces[forced.label])
    first = [line for line in diff.stdout.splitlines() if line.startswith("first divergence")]
    assert first and first[0] in expected.stdout


@pytest.mark.slow
@pytest.mark.needs_tree
def test_repro_against_exact_parity_servers_is_identical(series, run_cli):
    common = ["--variant", "exact-parity"]
    with (
        _harness_server(*common, "--mode", "base") as base,
        _harness_server(*common, "--mode", "forced-reject", "--gamma", "2") as spec,
    ):
        proc = run_cli(
            "repro",
            "--base-url",
            base,
            "--spec-url",
            spec,
            "--max-new-tokens",
            "12",
            "--repeats",
            "2",
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout.count("identical: spec equals base for all 12 tokens") == 2
        assert "(1 distinct output(s) in 2 runs)" in proc.stdout
        for body, message in (
            ({"input_ids": [1], "sampling_params": {"bogus": 1}}, "unknown field `bogus`"),
            ({"input_ids": [1], "sampling_params": {"temperature": 0.7}}, "temperature 0"),
            ({"text": "hello"}, "input_ids"),
        ):
            request = urllib.request.Request(
                base + "/generate", data=json.dumps(body).encode(), method="POST"
            )
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(request, timeout=60)
            assert err.value.code == 400
            assert message in json.loads(err.value.read())["error"]


# Servers that answer badly, or not at all.


@contextmanager
def _stub(respond):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            respond(self)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


def _reply(status: int, body: bytes, content_type: str | None = None):
    def respond(handler):
        handler.send_response(status)
        handler.send_header("Content-Length", str(len(body)))
        if content_type:
            handler.send_header("Content-Type", content_type)
        handler.end_headers()
        handler.wfile.write(body)

    return respond


def _outputs(ids: list[int], meta: dict | None = None):
    return _reply(
        200, json.dumps({"text": "", "output_ids": ids, "meta_info": meta or {}}).encode()
    )


def test_a_divergence_is_reported_with_its_index_tokens_and_metrics(run_cli):
    meta = {"spec_accept_rate": 0.0, "spec_verify_ct": 3, "spec_correct_drafts_histogram": [3]}
    with _stub(_outputs([5, 6, 7, 8])) as base, _stub(_outputs([5, 6, 9, 8], meta)) as spec:
        proc = run_cli("repro", "--base-url", base, "--spec-url", spec, "--max-new-tokens", "4")
    assert proc.returncode == 1
    assert "first divergence: output index 2: base 7, spec 9; indices 0..1 match" in proc.stdout
    assert (
        "spec metrics: spec_accept_rate=0.0 spec_verify_ct=3 spec_correct_drafts_histogram=[3]"
        in proc.stdout
    )
    assert f"output sha256 {_sha([5, 6, 9, 8])} (4 tokens)" in proc.stdout


def test_input_ids_come_from_a_file(tmp_path, run_cli):
    (tmp_path / "ids.json").write_text("[1, 2, 3]")
    with _stub(_outputs([4])) as url:
        proc = run_cli(
            "repro", "--base-url", url, "--spec-url", url, "--input-ids", str(tmp_path / "ids.json")
        )
    assert proc.returncode == 0
    assert f"input: 3 ids, sha256 {_sha([1, 2, 3])}\n" in proc.stdout
    (tmp_path / "bad").write_text("one two")
    proc = run_cli(
        "repro", "--base-url", url, "--spec-url", url, "--input-ids", str(tmp_path / "bad")
    )
    assert proc.returncode == 2 and "is not a list of token ids" in proc.stderr


def _hang(handler):
    threading.Event().wait(5)


def _close(handler):
    handler.close_connection = True  # no status line, no body


@pytest.mark.parametrize(
    "respond,message",
    [
        (
            _reply(500, b'{"error": {"message": "boom"}}'),
            'answered HTTP 500 Internal Server Error: {"error": {"message": "boom"}}',
        ),
        (
            _reply(404, b""),
            "/generate answered HTTP 404 Not Found with an empty body (no /generate there: "
            "--base-url and --spec-url are a server's root URL)",
        ),
        (
            _reply(502, b"<html>\n<body>\n  Bad   gateway\n</body>\n</html>\n"),
            "answered HTTP 502 Bad Gateway: an HTML page",
        ),
        (
            _reply(500, b"Server error:\n" + b"x" * 500),
            "answered HTTP 500 Internal Server Error: Server error: " + "x" * 106 + "...",
        ),
        (_reply(200, b"<html>"), "answered HTTP 200 OK with something that is not JSON: an HTML"),
        (_reply(200, b""), "answered HTTP 200 OK with something that is not JSON: an empty body"),
        (_reply(200, b"\x80\x00 not text"), "answered HTTP 200 OK with something that is not JSON"),
        (_reply(200, b'{"text": "hi"}'), "answered without output_ids (got ['text'])"),
        (_hang, "did not answer within 1 s"),
        (_close, "closed the connection without an answer"),
    ],
    ids=[
        "http-error",
        "404-empty-body",
        "multi-line-body",
        "long-body",
        "not-json",
        "empty-200",
        "not-utf8",
        "no-output-ids",
        "timeout",
        "closed",
    ],
)
def test_a_bad_server_gets_a_clear_error(respond, message, run_cli):
    with _stub(respond) as url, _stub(_outputs([1])) as good:
        proc = run_cli("repro", "--base-url", good, "--spec-url", url, "--timeout", "1")
    assert_refused(proc, message)


@pytest.mark.parametrize(
    "respond,message",
    [
        (_reply(200, b"Cache flushed.\n"), None),
        (_reply(400, b"Flush cache failed.\n"), "HTTP 400 Bad Request: Flush cache failed."),
        (_reply(404, b""), "/flush_cache answered HTTP 404 Not Found with an empty body (no "
                           "/flush_cache there"),
        (_hang, "/flush_cache did not flush its cache: timed out"),
    ],
    ids=["flushed", "refused", "404", "timeout"],
)  # fmt: skip
def test_a_cache_flush_is_done_or_a_clear_error(respond, message):
    """sglang 0.5.23 answers 400 (its message, else "Flush cache failed.") while requests run."""
    with _stub(respond) as url:
        if message is None:
            flush_cache(url, 1)
            return
        with pytest.raises(GdnParityError) as refused:
            flush_cache(url, 1)
    assert message in str(refused.value)


# nginx's own error page, padding comments and all (about 600 bytes).
NGINX_502 = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    b"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.24.0</center>\r\n"
    b"</body>\r\n</html>\r\n"
    + b"<!-- a padding to disable MSIE and Chrome friendly error page -->\r\n"
    * 6
)
SIGN_IN = (
    "<!DOCTYPE html>\n<html><head>\n<title>\n  Sign in \u2013 Proxy\n</title>".encode() + b" " * 400
)


@pytest.mark.parametrize(
    "status,page,said",
    [
        (502, NGINX_502, "HTTP 502 Bad Gateway: an HTML page titled '502 Bad Gateway'"),
        (200, SIGN_IN, "HTTP 200 OK with something that is not JSON: an HTML page titled "
                       "'Sign in \u2013 Proxy'"),
    ],
    ids=["proxy-error-page", "login-page"],
)  # fmt: skip
def test_an_html_page_is_named_by_its_status_and_title(status, page, said, run_cli):
    """An HTML page where sglang's JSON should be: a proxy's error page, a login page. Before:
    the page's first 300 characters, markup and all, on the error's line (430 characters for
    nginx's), and for a page served with 200 its first 200 bytes, without the status."""
    with _stub(_reply(status, page, "text/html")) as url, _stub(_outputs([1])) as good:
        proc = run_cli("repro", "--base-url", good, "--spec-url", url)
    assert_refused(proc, "")
    assert proc.stderr == f"gdn-parity repro: error: {url}/generate answered {said}\n"


def test_an_unreachable_server_gets_a_clear_error(run_cli):
    with _stub(_outputs([1])) as good:
        port = good.rsplit(":", 1)[1]
    proc = run_cli(
        "repro", "--base-url", f"http://127.0.0.1:{port}", "--spec-url", "http://127.0.0.1:1"
    )
    assert proc.returncode == 2
    assert "is unreachable" in proc.stderr
