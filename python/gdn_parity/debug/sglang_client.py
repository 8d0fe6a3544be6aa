"""A client of sglang's native ``POST /generate`` (JSON, non-streaming), as 0.5.23 defines it,
and of its ``POST /flush_cache``.

The request is a ``GenerateRequest`` of ``sglang/api/v1/api_types.py``
(``input_ids``, ``sampling_params``, ``stream``, ``rid``); the answer is a
``GenerateResponse``: ``output_ids`` and ``meta_info``, in which the tokenizer
manager adds the speculative-decoding counters (``spec_*``). Standard library
only, so it runs next to any server.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass

from gdn_parity.errors import GdnParityError

# What sglang 0.5.23's tokenizer manager puts in meta_info for a speculative request
# (spec_accept_histogram is the name in some later builds, as in sglang#35150).
SPEC_METRICS = (
    "spec_accept_rate",
    "spec_accept_length",
    "spec_num_correct_drafts",
    "spec_num_proposed_drafts",
    "spec_verify_ct",
    "spec_correct_drafts_histogram",
    "spec_accept_histogram",
)


def greedy_payload(input_ids: Sequence[int], max_new_tokens: int, rid: str) -> dict:
    """The request of sglang#35150: greedy, ``ignore_eos``, not streamed."""
    return {
        "input_ids": list(input_ids),
        "sampling_params": {
            "temperature": 0.0,
            "top_p": 1.0,
            "top_k": -1,
            "max_new_tokens": max_new_tokens,
            "ignore_eos": True,
        },
        "stream": False,
        "rid": rid,
    }


@dataclass(frozen=True)
class Generation:
    output_ids: list[int]
    meta_info: dict

    @property
    def spec_metrics(self) -> dict:
        return {k: self.meta_info[k] for k in SPEC_METRICS if k in self.meta_info}


def check_base_url(base_url: str) -> None:
    """Refuse anything that is not ``http(s)://host[:port]``, before any request is sent."""
    try:
        parts = urllib.parse.urlsplit(base_url)
        parts.port  # noqa: B018 (parses the port: ValueError when it is not one)
    except ValueError as exc:
        raise GdnParityError(f"{base_url!r} is not a valid URL ({exc})") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise GdnParityError(f"{base_url!r} is not an http(s) URL such as http://host:30000")


SAID_AT_MOST = 120  # characters of a body that is not sglang's answer, on the error's line


def _gist(body: bytes, content_type: str) -> str:
    """What a body that is not sglang's answer says, short enough for one line: an HTML page
    (a proxy's or a login's) by its title, any other text cut at ``SAID_AT_MOST`` characters;
    '' for an empty body."""
    text = body.decode(errors="replace")
    if "html" in content_type.lower() or text.lstrip().startswith("<"):
        title = re.search(r"<title[^>]*>(.*?)</title>", text, re.IGNORECASE | re.DOTALL)
        name = " ".join(re.sub(r"<[^>]*>", "", title.group(1)).split()) if title else ""
        return f"an HTML page titled {_cut(name)!r}" if name else "an HTML page"
    return _cut(" ".join(text.split()))


def _cut(text: str) -> str:
    """``text`` at most ``SAID_AT_MOST`` characters (``...`` where cut), printable only."""
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= SAID_AT_MOST else text[:SAID_AT_MOST] + "..."


def _http_error(url: str, exc: urllib.error.HTTPError) -> str:
    """One line: the status, its reason and what the body said (or that it was empty)."""
    status = " ".join(str(part) for part in (exc.code, exc.reason) if part)
    said = _gist(exc.read(), exc.headers.get("Content-Type", ""))
    line = f"{url} answered HTTP {status}" + (f": {said}" if said else " with an empty body")
    if exc.code == 404:
        endpoint = urllib.parse.urlsplit(url).path
        line += f" (no {endpoint} there: --base-url and --spec-url are a server's root URL)"
    return line


def flush_cache(base_url: str, timeout: float, wait_s: float = 0.0) -> None:
    """``POST /flush_cache``: empty the server's radix cache, so that what a request finds
    cached does not depend on the requests before it (sglang refuses while any runs). With
    ``wait_s``, sglang waits up to that long for its running requests to leave
    (``?timeout=``, 0.5.23's ``SchedulerFlushWrapper``)."""
    url = base_url.rstrip("/") + "/flush_cache" + (f"?timeout={wait_s:g}" if wait_s else "")
    request = urllib.request.Request(url, data=b"", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        raise GdnParityError(_http_error(url, exc)) from exc
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise GdnParityError(f"{url} did not flush its cache: {reason}") from exc


def generate(base_url: str, payload: dict, timeout: float) -> Generation:
    """POST ``payload`` to ``base_url/generate``; a clear error for every way it can fail."""
    url = base_url.rstrip("/") + "/generate"
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
            status = " ".join(str(part) for part in (response.status, response.reason) if part)
            content_type = response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        raise GdnParityError(_http_error(url, exc)) from exc
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError | socket.timeout):
            raise GdnParityError(f"{url} did not answer within {timeout:g} s") from exc
        raise GdnParityError(f"{url} is unreachable: {exc.reason}") from exc
    except TimeoutError as exc:
        raise GdnParityError(f"{url} did not answer within {timeout:g} s") from exc
    except (http.client.HTTPException, OSError) as exc:
        raise GdnParityError(f"{url} closed the connection without an answer ({exc})") from exc
    try:
        answer = json.loads(body)
    except ValueError as exc:  # JSONDecodeError, or UnicodeDecodeError: bytes in no UTF
        said = _gist(body, content_type) or "an empty body"
        raise GdnParityError(
            f"{url} answered HTTP {status} with something that is not JSON: {said}"
        ) from exc
    if not isinstance(answer, dict) or not isinstance(answer.get("output_ids"), list):
        keys = sorted(answer) if isinstance(answer, dict) else type(answer).__name__
        raise GdnParityError(
            f"{url} answered without output_ids (got {keys}): is it sglang's /generate, "
            "and was the request sent with input_ids?"
        )
    if not all(isinstance(i, int) for i in answer["output_ids"]):
        raise GdnParityError(f"{url} answered with output_ids that are not all integers")
    meta_info = answer.get("meta_info")
    return Generation(answer["output_ids"], meta_info if isinstance(meta_info, dict) else {})
