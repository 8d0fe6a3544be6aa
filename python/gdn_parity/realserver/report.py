"""``results.md``: one table row per comparison and batch, request 0's hashes, the requests
that differ, and each server start's command line, environment, log and stop."""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from gdn_parity.debug.issue35150 import INPUT_SHA256
from gdn_parity.realserver.plan import pair_label
from gdn_parity.realserver.results import BatchResult, ComparisonResult, RunResults, ServerRun

STATUS = {0: "every comparison met its expectation", 1: "a comparison missed its expectation"}


def _number(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _divergence(b: BatchResult) -> str:
    if b.first_divergence is None:
        return "none" if b.requests else "n/a"
    index = min(r.index for r in b.requests if r.first_divergence == b.first_divergence)
    return f"{b.first_divergence} (request {index})"


def _verdict(c: ComparisonResult, b: BatchResult) -> str:
    if b.error:
        return f"error: {b.error}"
    return f"{b.observed}: {'met' if b.met else 'MISSED'}"


def _at_once(b: BatchResult) -> str:
    if b.at_once is None:
        return "unknown"
    return f"{b.at_once} ({b.limited_by}'s limit)" if b.limited_by else str(b.at_once)


def _rows(c: ComparisonResult) -> Iterable[str]:
    servers = pair_label(c.base, c.spec, c.reference)
    if c.not_run and not c.batches:
        yield f"| {c.name} | {servers} | | | | | | | | {c.expect} | not run: {c.not_run} |"
        return
    for b in c.batches:
        distinct = "n/a" if b.distinct_min is None else f"{b.distinct_min} / {b.distinct_median:g}"
        identical = f"{b.identical}/{b.batch}" if b.requests else "n/a"
        yield (
            f"| {c.name} | {servers} | {b.batch} | {_at_once(b)} | {identical} | {_divergence(b)} "
            f"| {distinct} | {_number(b.accept_rate)} | {b.states} | {c.expect} "
            f"| {_verdict(c, b)} |"
        )
    if c.not_run:
        yield f"| {c.name} | {servers} | | | | | | | | {c.expect} | not run: {c.not_run} |"


def _request_zero(results: RunResults) -> Iterable[str]:
    yield "## Request 0: sglang#35150's request"
    yield ""
    yield (
        f"Input: the issue's 24 ids, sha256 `{INPUT_SHA256}`. Output sha256 as the issue "
        'hashes ids: `sha256(",".join(ids))`.'
    )
    yield ""
    yield "| comparison | batch | tokens | Base output sha256 | speculative output sha256 |"
    yield "|---|---|---|---|---|"
    for c in results.comparisons:
        for b in c.batches:
            if b.requests:
                r = b.requests[0]
                yield (
                    f"| {c.name} | {b.batch} | {r.base_tokens} / {r.spec_tokens} "
                    f"| `{r.base_sha256}` | `{r.spec_sha256}` |"
                )


def _differing(results: RunResults) -> Iterable[str]:
    rows = [
        (c, b, r)
        for c in results.comparisons
        for b in c.batches
        for r in b.requests
        if r.first_divergence is not None or (r.trace and r.trace.first)
    ]
    if not rows:
        return
    yield ""
    yield "## Requests that differ"
    yield ""
    yield "| comparison | batch | request | rid | first token divergence | first state divergence |"
    yield "|---|---|---|---|---|---|"
    for c, b, r in rows:
        state = r.trace.first.describe() if r.trace and r.trace.first else "none"
        token = "none" if r.first_divergence is None else str(r.first_divergence)
        yield f"| {c.name} | {b.batch} | {r.index} | `{r.rid}` | {token} | {state} |"


def server_lines(s: ServerRun) -> Iterable[str]:
    """A server start's section: how it came up or failed, its stop, log, command line."""
    yield ""
    yield f"### {s.label} ({s.mode}{'' if s.gamma is None else f', gamma {s.gamma}'})"
    yield ""
    if s.failure:
        yield f"- **did not serve**: {s.failure}"
    else:
        yield f"- up after {_number(s.up_after_s, 1)} s on port {s.port}"
    yield f"- stopped: {s.stopped or 'not by the runner'}"
    if s.leftover:
        yield f"- **processes alive after the stop**: {s.leftover}"
    yield f"- log: `{s.log}`" + (f"; GDN state trace: `{s.trace_dir}`" if s.trace_dir else "")
    yield f"- in `{s.cwd}`, with " + " ".join(f"`{k}={v}`" for k, v in s.env.items())
    yield ""
    yield "```"
    yield shlex.join(s.argv)
    yield "```"
    if s.log_tail:
        yield ""
        yield f"Its log's last {len(s.log_tail)} lines:"
        yield ""
        yield "```"
        yield from s.log_tail
        yield "```"


def summary(results: RunResults) -> list[str]:
    """The page's title, what ran and its table: what the verb prints."""
    status = results.exit_status()
    problem = results.problem()
    failed = [s.label for s in results.servers if s.failure]
    if not results.complete:
        how = f"The run stopped early: {results.interrupted}."
    elif failed:
        how = f"Every step ran, but {', '.join(failed)} failed (see Server starts)."
    else:
        how = "Every step ran."
    lines = [
        "# Base against DSpark on real sglang servers",
        "",
        f"Plan: `{results.plan}`. {how} Exit status {status}: {STATUS.get(status, problem)}.",
        "",
        "Every request's output tokens are compared (greedy, `ignore_eos`); distinct tokens "
        "count Base's output ids; GDN states compare the speculative server's trace with "
        "Base's (`gdn-parity trace-diff`). A batch is `identical` when every request's tokens "
        "are equal and no compared state differs. At once: the most requests both servers "
        "can run at once, by the limits `/server_info` declares (requests and KV tokens); "
        "the rest of a batch queues.",
        "",
        "| comparison | servers | batch | at once | requests identical | first divergence (min) "
        "| distinct tokens min / median | accept rate | GDN states | expected | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in results.comparisons:
        lines += _rows(c)
    return lines


def render(results: RunResults) -> str:
    lines = summary(results)
    lines += ["", *_request_zero(results), *_differing(results), "", "## Server starts"]
    for s in results.servers:
        lines += server_lines(s)
    return "\n".join(lines) + "\n"
