"""One batch of one comparison: N concurrent requests to Base, the same N to the speculative
server, every request's output compared, and where both servers trace, their GDN states.

Each request is one HTTP ``POST /generate`` in a thread of its own (greedy, ``ignore_eos``,
``gdn_parity.debug.sglang_client``); the rid is ``<comparison>-b<N>-<i>`` on both servers,
so their state traces align. Each server's radix cache is flushed right before it gets the
batch: a Base server serves several comparisons, and what it has cached from earlier ones
(request 0 is always the issue's prompt) would otherwise make its prefills differ from a
fresh server's. With ``reference = "alone"`` the base side gets each request alone, after
a flush of its own.

A batch's verdict: ``identical`` when every request's tokens are equal and no compared
state differs, else ``diverge``.
"""

from __future__ import annotations

import statistics
import threading
from pathlib import Path

from gdn_parity.debug.sglang_client import Generation, flush_cache, generate, greedy_payload
from gdn_parity.debug.tokens import first_divergence, ids_sha256
from gdn_parity.debug.trace_diff import Comparison, diff_traces, read_trace
from gdn_parity.errors import GdnParityError
from gdn_parity.realserver.plan import ComparisonSpec
from gdn_parity.realserver.process import hold_signals_in_this_thread
from gdn_parity.realserver.prompts import batch_prompts
from gdn_parity.realserver.results import BatchResult, RequestResult, StatePoint, TraceCheck

TRACE_GLOB = "gdn_state_trace.*.jsonl"  # one file per rank (0001's naming)
# sglang refuses a flush while a request runs; right after one, its scheduler may not be idle
# yet. It waits up to this long for them to leave.
FLUSH_WAIT_S = 30.0


def rid(comparison: str, batch: int, index: int) -> str:
    return f"{comparison}-b{batch}-{index}"


def send_concurrently(url: str, payloads: list[dict], timeout: float) -> list[Generation]:
    """Every payload at once, one thread and connection each; the answers in order."""
    answers: list[Generation | None] = [None] * len(payloads)
    failures: list[BaseException | None] = [None] * len(payloads)

    def send(i: int) -> None:
        hold_signals_in_this_thread()
        try:
            answers[i] = generate(url, payloads[i], timeout)
        except BaseException as exc:  # handed to the caller's thread
            failures[i] = exc

    threads = [threading.Thread(target=send, args=(i,), daemon=True) for i in range(len(payloads))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    bugs = [f for f in failures if f is not None and not isinstance(f, GdnParityError)]
    if bugs:
        raise bugs[0]
    failed = [f for f in failures if f is not None]
    if failed:
        raise GdnParityError(
            f"{len(failed)} of {len(payloads)} requests failed; the first: {failed[0]}"
        )
    return [a for a in answers if a is not None]


def _point(c: Comparison | None) -> StatePoint | None:
    if c is None:
        return None
    r = c.record
    return StatePoint(r["pos"], r["layer"], r["checkpoint"], r.get("step"))


def _trace_file(directory: Path) -> Path:
    files = sorted(directory.glob(TRACE_GLOB))
    if len(files) != 1:
        raise GdnParityError(f"{directory} holds {len(files)} files {TRACE_GLOB}, not one")
    return files[0]


def check_traces(base_dir: Path, spec_dir: Path, rids: list[str]) -> list[TraceCheck]:
    """Per rid: the states compared and the first that differs, or why none was compared."""
    try:
        base, spec = read_trace(_trace_file(base_dir)), read_trace(_trace_file(spec_dir))
    except GdnParityError as exc:
        return [TraceCheck(0, None, None, str(exc)) for _ in rids]
    checks = []
    for r in rids:
        try:
            diff = diff_traces(base, spec, r)
        except GdnParityError as exc:
            checks.append(TraceCheck(0, None, None, str(exc)))
            continue
        problem = None if diff.compared else "no state of the speculative trace has a counterpart"
        checks.append(
            TraceCheck(
                len(diff.compared), _point(diff.first), _point(diff.first_committed), problem
            )
        )
    return checks


def _states(checks: list[TraceCheck] | None) -> tuple[str, str | None]:
    """The batch's states in words, and the error when some could not be compared."""
    if checks is None:
        return "not traced", None
    problem = next((c.problem for c in checks if c.problem), None)
    if problem:
        return "not compared", f"trace: {problem}"
    differing = [(i, c.first) for i, c in enumerate(checks) if c.first is not None]
    if differing:
        i, first = min(differing, key=lambda d: (d[1].pos, d[0]))
        return (
            f"differ in {len(differing)} of {len(checks)} requests, first at "
            f"{first.describe()} (request {i})"
        ), None
    return f"bitwise equal at {sum(c.compared for c in checks)} compared states", None


def _states_differ(checks: list[TraceCheck] | None) -> bool:
    return checks is not None and any(c.first is not None for c in checks)


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def failed_batch(batch: int, error: str) -> BatchResult:
    return BatchResult(
        batch, [], error, 0, None, None, None, None, None, "not compared", None, False
    )


def judge(
    comparison: ComparisonSpec,
    batch: int,
    prompts: list[list[int]],
    base: list[Generation],
    spec: list[Generation],
    traces: list[TraceCheck] | None,
) -> BatchResult:
    rows = []
    for i, (prompt, b, s) in enumerate(zip(prompts, base, spec, strict=True)):
        rows.append(
            RequestResult(
                index=i,
                rid=rid(comparison.name, batch, i),
                prompt_len=len(prompt),
                prompt_sha256=ids_sha256(prompt),
                base_sha256=ids_sha256(b.output_ids),
                spec_sha256=ids_sha256(s.output_ids),
                base_tokens=len(b.output_ids),
                spec_tokens=len(s.output_ids),
                first_divergence=first_divergence(b.output_ids, s.output_ids),
                base_distinct=len(set(b.output_ids)),
                spec_distinct=len(set(s.output_ids)),
                base_completion_tokens=b.meta_info.get("completion_tokens"),
                spec_completion_tokens=s.meta_info.get("completion_tokens"),
                spec_metrics=s.spec_metrics,
                trace=None if traces is None else traces[i],
            )
        )
    divergences = [r.first_divergence for r in rows if r.first_divergence is not None]
    states, error = _states(traces)
    identical = not divergences and not _states_differ(traces)
    observed = "identical" if identical else "diverge"
    distinct = [r.base_distinct for r in rows]
    return BatchResult(
        batch=batch,
        requests=rows,
        error=error,
        identical=len(rows) - len(divergences),
        first_divergence=min(divergences, default=None),
        distinct_min=min(distinct),
        distinct_median=statistics.median(distinct),
        accept_rate=_mean(
            [
                r.spec_metrics["spec_accept_rate"]
                for r in rows
                if "spec_accept_rate" in r.spec_metrics
            ]
        ),
        accept_length=_mean(
            [
                r.spec_metrics["spec_accept_length"]
                for r in rows
                if "spec_accept_length" in r.spec_metrics
            ]
        ),
        states=states,
        observed=observed,
        met=error is None and observed == comparison.expect,
    )


def _alone(url: str, payload: dict, timeout: float) -> Generation:
    """One request with nothing else in flight, after a cache flush: what batch 1 sees."""
    flush_cache(url, timeout, wait_s=FLUSH_WAIT_S)
    (answer,) = send_concurrently(url, [payload], timeout)
    return answer


def run_batch(
    comparison: ComparisonSpec,
    batch: int,
    base_url: str,
    spec_url: str,
    timeout: float,
    trace_dirs: tuple[Path, Path] | None,
) -> BatchResult:
    """The batch's requests to Base, then to the speculative server, each server's radix
    cache flushed first, and their verdict. With ``reference = "alone"`` the base side gets
    each request alone, one after another (the speculative server's own, where it is named)."""
    prompts = batch_prompts(
        batch, comparison.prompt_len, comparison.prompt_seed, comparison.prompt_vocab
    )
    rids = [rid(comparison.name, batch, i) for i in range(batch)]
    payloads = [
        greedy_payload(p, comparison.max_new_tokens, r) for p, r in zip(prompts, rids, strict=True)
    ]
    try:
        if comparison.reference == "alone":
            base = [_alone(base_url, payload, timeout) for payload in payloads]
        else:
            flush_cache(base_url, timeout, wait_s=FLUSH_WAIT_S)
            base = send_concurrently(base_url, payloads, timeout)
    except GdnParityError as exc:
        alone = " alone" if comparison.reference == "alone" else ""
        return failed_batch(batch, f"{comparison.base}{alone}: {exc}")
    try:
        flush_cache(spec_url, timeout, wait_s=FLUSH_WAIT_S)
        spec = send_concurrently(spec_url, payloads, timeout)
    except GdnParityError as exc:
        return failed_batch(batch, f"{comparison.spec}: {exc}")
    traces = None if trace_dirs is None else check_traces(*trace_dirs, rids)
    return judge(comparison, batch, prompts, base, spec, traces)
