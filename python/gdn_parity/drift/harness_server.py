"""``gdn-parity harness-server``: the drift harness's model behind sglang's ``POST /generate``.

``--mode base`` decodes greedily; ``--mode forced-reject`` runs DSpark-style
verify rounds that reject every draft and commit the target's own token (the
experiment of sglang#35150), with the numerics of ``--variant``. A request is
checked with sglang's own contract decoder
(``sglang.api.v1.api_types.GenerateRequest.from_json_value``) and refused as
sglang's ``/generate`` refuses it (HTTP 400, ``{"error": message}``); the
answer is a ``GenerateResponse`` whose ``meta_info`` carries the ``spec_*``
counters as sglang's tokenizer manager computes them. One request runs at a
time, as with ``--max-running-requests 1``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
import warnings
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gdn_parity.drift.run.modes import Mode, ModeKind
from gdn_parity.drift.run.variants import Variant
from gdn_parity.errors import GdnParityError

if TYPE_CHECKING:
    from gdn_parity.drift.model.hybrid import HybridModel
    from gdn_parity.drift.run.loops import RunResult


class RequestError(ValueError):
    """A request this server refuses (HTTP 400)."""


@dataclass
class Engine:
    model: HybridModel
    mode: Mode
    exact_parity: bool
    contract: Any  # sglang.api.v1.api_types
    lock: threading.Lock

    def generate(self, body: Any) -> dict:
        from gdn_parity.drift.run import loops

        try:
            request = self.contract.GenerateRequest.from_json_value(body)
        except self.contract.JsonContractError as exc:
            raise RequestError(str(exc)) from exc
        ids, params = request.input_ids, request.sampling_params
        if request.stream:
            raise RequestError("the harness server does not stream: send stream=false")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, int) for i in ids):
            raise RequestError("the harness server takes one request of input_ids (no text)")
        params = params or self.contract.SamplingParams()
        if not isinstance(params, self.contract.SamplingParams):
            raise RequestError("one sampling_params object, please")
        if params.temperature != 0:
            raise RequestError("the harness server decodes greedily: send temperature 0")
        vocab = self.model.c.vocab
        if any(not 0 <= i < vocab for i in ids):
            raise RequestError(f"input ids must be in [0, {vocab})")
        max_new = params.max_new_tokens
        if max_new is None or max_new < 1:
            raise RequestError("max_new_tokens must be at least 1")
        if len(ids) + max_new + self.mode.gamma + 1 > self.model.max_len:
            raise RequestError(f"prompt + max_new_tokens exceed the context ({self.model.max_len})")
        rid = request.rid if isinstance(request.rid, str) else uuid.uuid4().hex
        with self.lock:
            started = time.perf_counter()
            self.model.rid = rid
            start, first = loops.prefill(self.model, ids)
            meta: dict[str, Any] = {}
            if self.mode.kind is ModeKind.BASE:
                tokens = loops.run_base(
                    self.model, start, first, len(ids), max_new, lambda n: None
                ).tokens
            else:
                drafter = loops.RandomDrafter(vocab, seed=0)
                run = loops.run_spec(
                    self.model,
                    start,
                    first,
                    len(ids),
                    self.mode,
                    max_new,
                    self.exact_parity,
                    drafter,
                    lambda n: None,
                )
                tokens = run.tokens
                meta = _spec_meta(run, len(tokens))
            latency = time.perf_counter() - started
        response = {
            "text": "",
            "output_ids": tokens,
            "meta_info": {
                "id": rid,
                "finish_reason": {"type": "length", "length": len(tokens)},
                "prompt_tokens": len(ids),
                "completion_tokens": len(tokens),
                "cached_tokens": 0,
                "e2e_latency": latency,
                **meta,
            },
        }
        self.contract.GenerateResponse.from_json_value(response)  # the answer's own contract
        return response


def _spec_meta(run: RunResult, completion_tokens: int) -> dict:
    """meta_info's spec_* fields, as TokenizerManager._calculate_spec_decoding_metrics sets them."""
    if run.rounds == 0 or run.proposed == 0:
        return {}
    return {
        "spec_accept_rate": run.accepted / run.proposed,
        "spec_accept_length": completion_tokens / run.rounds,
        "spec_num_correct_drafts": run.accepted,
        "spec_num_proposed_drafts": run.proposed,
        "spec_verify_ct": run.rounds,
        "spec_correct_drafts_histogram": run.histogram,
    }


def _handler(engine: Engine) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path == "/health":
                self._send(200, {})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:  # noqa: N802
            if self.path != "/generate":
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                self._send(200, engine.generate(body))
            except json.JSONDecodeError as exc:
                self._send(400, {"error": f"the body is not JSON: {exc}"})
            except RequestError as exc:
                self._send(400, {"error": str(exc)})

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the client reports

    return Handler


@dataclass(frozen=True)
class ServerPlan:
    variant: Variant
    tree: Path
    mode: Mode
    size: str
    device: str
    ssm_dtype: str
    context_length: int
    trace_dir: Path | None


def _quiet_notices_the_user_cannot_act_on() -> None:
    """fla's CPU fallback, triton's deprecation of sglang's block pointers, the JIT's arch probe."""
    warnings.filterwarnings("ignore", message="Triton is not supported on current platform")
    warnings.filterwarnings("ignore", message="tl.make_block_ptr is deprecated")
    logging.getLogger("sglang.kernels.jit.utils.arch").setLevel(logging.ERROR)


def listen(host: str, port: int) -> ThreadingHTTPServer:
    """Take the port first, so that a port in use fails before any tree or model is built."""
    try:
        return ThreadingHTTPServer((host, port), BaseHTTPRequestHandler)
    except OSError as exc:
        raise GdnParityError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc


def run_server(plan: ServerPlan, server: ThreadingHTTPServer) -> None:
    """Build the model on the variant's kernels; serve ``/generate`` on ``server`` until killed."""
    from gdn_parity.sandbox.sglang_tree import use_tree

    _quiet_notices_the_user_cannot_act_on()
    use_tree(plan.tree, plan.device)
    import sglang.api.v1.api_types as contract

    from gdn_parity.drift.model.hybrid import HybridModel

    model = HybridModel.build(
        plan.size, plan.device, max_len=plan.context_length, ssm_dtype=plan.ssm_dtype
    )
    if plan.mode.kind is not ModeKind.BASE:
        model.set_draft_tokens(plan.mode.gamma + 1)
    if plan.trace_dir is not None:
        flags = {"variant": plan.variant.name, "mode": plan.mode.label}
        model.start_trace(str(plan.trace_dir / "gdn_state_trace.tp0.pp0.jsonl"), plan.size, flags)
    engine = Engine(model, plan.mode, plan.variant.exact_parity, contract, threading.Lock())
    server.RequestHandlerClass = _handler(engine)
    host, port = server.server_address[:2]
    print(f"gdn-parity harness-server listening on http://{host}:{port}", flush=True)
    with server:
        server.serve_forever()
