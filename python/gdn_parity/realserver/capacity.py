"""What a server holds, as it says after its start (``GET /server_info``), and which batches
it cannot run at once.

sglang 0.5.23's ``/server_info`` holds ``internal_states``, one per data-parallel rank, each
with ``effective_max_running_requests_per_dp`` (the scheduler's ``max_running_requests``,
what the memory pools allow) and ``memory_usage.token_capacity`` (the KV pool's tokens). A
batch above either would queue or retract requests, and its time would not be a batch's.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from gdn_parity.errors import GdnParityError
from gdn_parity.realserver.results import Capacity, ServerRun

SERVER_INFO_PATH = "/server_info"
SERVER_INFO_TIMEOUT_S = 30.0


def _integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def server_capacity(url: str, timeout: float = SERVER_INFO_TIMEOUT_S) -> Capacity:
    """The server's limits; an error when it does not answer with sglang's JSON."""
    try:
        with urllib.request.urlopen(url + SERVER_INFO_PATH, timeout=timeout) as response:
            info = json.loads(response.read())
        state = info["internal_states"][0]
    except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise GdnParityError(f"GET {SERVER_INFO_PATH} gave no internal state ({exc})") from exc
    if not isinstance(state, dict):
        raise GdnParityError(f"GET {SERVER_INFO_PATH}: internal_states[0] is not an object")
    memory = state.get("memory_usage")
    return Capacity(
        max_running_requests=_integer(state.get("effective_max_running_requests_per_dp")),
        token_capacity=_integer(memory.get("token_capacity")) if isinstance(memory, dict) else None,
    )


def over_capacity(capacity: Capacity, batch: int, tokens_per_request: int) -> str | None:
    """Why ``batch`` requests of ``tokens_per_request`` KV tokens each cannot run at once on
    a server of ``capacity``, or None."""
    running = capacity.max_running_requests
    if running is not None and batch > running:
        return f"the server runs at most {running} requests at once"
    tokens = capacity.token_capacity
    if tokens is not None and batch * tokens_per_request > tokens:
        return (
            f"its KV pool holds {tokens} tokens, fewer than {batch} x {tokens_per_request} "
            "(prompt, long run and one verify's rows)"
        )
    return None


def at_once(batch: int, starts: list[ServerRun], tokens: int) -> tuple[int | None, str | None]:
    """The most of ``batch`` requests of ``tokens`` tokens (prompt and output; a speculative
    start holds gamma more, a verify's rows past the last token) that every one of
    ``starts`` can run at once, by its declared limits, and the start whose limit that is
    (None when each can run the whole batch); (None, None) when a start did not say."""
    limits: list[tuple[int, str]] = []
    for start in starts:
        cap = start.capacity
        if cap is None or cap.max_running_requests is None:
            return None, None
        limits.append((cap.max_running_requests, start.label))
        if cap.token_capacity is not None:
            rows = 0 if start.gamma is None else start.gamma
            limits.append((cap.token_capacity // (tokens + rows), start.label))
    running, label = min(limits)
    return (batch, None) if running >= batch else (running, label)
