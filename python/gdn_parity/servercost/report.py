"""``results.md``: per benchmark, one row per (server, accept length, batch) that ran, the
cells that did not run and why, each start's bandwidth and limits, and each start's command
line, environment, log and stop."""

from __future__ import annotations

from collections.abc import Iterable

from gdn_parity.realserver.report import server_lines
from gdn_parity.servercost.plan import BenchmarkSpec, CostPlan
from gdn_parity.servercost.results import CostResults, Row, Spread

HEADERS = (
    "server",
    "γ",
    "accept length (measured)",
    "batch",
    "TPOT ms [spread]",
    "step ms [spread]",
    "floor ms/step",
    "floor ms/token",
    "TPOT / baseline",
    "exact / non-exact",
)


def _spread(s: Spread) -> str:
    return f"{s.median:.2f} [{s.low:.2f}-{s.high:.2f}]"


def _maybe(value: float | None, text: str) -> str:
    return "-" if value is None else text.format(value)


def _cells(r: Row) -> list[str]:
    k = 1 if r.accept_length is None else r.accept_length
    return [
        r.server,
        "-" if r.gamma is None else str(r.gamma),
        f"{k} ({r.measured.tokens_per_step:.2f})",
        str(r.batch),
        _spread(r.measured.tpot_ms),
        _spread(r.measured.step_ms),
        "n/a" if r.floor is None else f"{r.floor.step_ms:.2f}",
        "n/a" if r.floor is None else f"{r.floor.token_ms:.2f}",
        _maybe(r.vs_baseline, "{:.3f}"),
        _maybe(r.vs_twin, "{:.3f}"),
    ]


def _benchmark(b: BenchmarkSpec, results: CostResults) -> Iterable[str]:
    yield f"## {b.name}"
    yield ""
    yield (
        f"Batches {', '.join(map(str, b.batches))}, sent at once; {b.prompt_len} seeded ids a "
        f"request; {b.short_tokens} then {b.long_tokens} new tokens; {b.repeats} repeats. "
        f"Baseline: {b.baseline}. Under the contract: "
        + (", ".join(f"{e} (twin {t})" for e, t in b.contract.items()) or "none")
        + "."
    )
    yield ""
    yield "| " + " | ".join(HEADERS) + " |"
    yield "|" + "---|" * len(HEADERS)
    rows = [r for r in results.rows if r.benchmark == b.name]
    for r in rows:
        yield "| " + " | ".join(_cells(r)) + " |"
    retracted = [r for r in rows if r.retractions]
    if retracted:
        yield ""
        yield (
            "Requests were retracted (the KV pool ran out) in: "
            + ", ".join(
                f"{r.server}{'' if r.accept_length is None else f' at {r.accept_length}'} "
                f"batch {r.batch} ({r.retractions})"
                for r in retracted
            )
            + ". Those times include the recomputation."
        )
    missing = [c for c in results.cells if c.benchmark == b.name and c.not_run]
    if missing:
        yield ""
        yield "Not run:"
        yield ""
        for c in missing:
            yield f"- {c.start}, batch {c.batch}: {c.not_run}"


def _starts(results: CostResults) -> Iterable[str]:
    yield "## Starts: copy bandwidth and limits"
    yield ""
    yield "| start | copy GB/s | device | max running requests | KV pool tokens |"
    yield "|---|---|---|---|---|"
    for s in results.starts:
        if s.bandwidth is None:
            bandwidth, device = f"not measured: {s.bandwidth_problem}", "-"
        else:
            bandwidth, device = f"{s.bandwidth.bytes_per_s / 1e9:.0f}", s.bandwidth.device
        cap = s.server.capacity
        running = (
            "-" if cap is None or cap.max_running_requests is None else cap.max_running_requests
        )
        tokens = "-" if cap is None or cap.token_capacity is None else cap.token_capacity
        yield f"| {s.server.label} | {bandwidth} | {device} | {running} | {tokens} |"


LEGEND = (
    "TPOT and step come from a long and a short run of the same prompts, each after a cache "
    "flush. TPOT is the difference of their e2e_latency over that of their completion_tokens. "
    "Step divides it by the difference of spec_verify_ct on DSpark, of completion_tokens on "
    "Base. Prefill and start-up cancel. Each is the median over a repeat's requests, then over "
    "repeats [lowest-highest]. The measured accept length is new tokens per step. The floor is "
    "the bytes a target step must move over the copy bandwidth measured before its start: "
    "every weight once, each request's KV prefix, the GDN states read and written per row. Per "
    "token, it is divided by the accept length. TPOT / baseline divides by the baseline's TPOT "
    "at the batch; exact / non-exact by the twin's at the batch and accept length."
)


def summary(results: CostResults, plan: CostPlan) -> list[str]:
    """The page's title, what ran and its tables: what the verb prints."""
    problem = results.problem()
    how = "Every step ran." if problem is None else f"Incomplete: {problem}."
    lines = [
        "# Cost on real sglang servers",
        "",
        f"Plan: `{results.plan}`: size {plan.size}, SSM pool {plan.ssm_dtype}, KV cache "
        f"{plan.kv_cache_dtype}. {how}",
        "",
        LEGEND,
    ]
    for b in plan.benchmarks:
        lines += ["", *_benchmark(b, results)]
    return lines


def render(results: CostResults, plan: CostPlan) -> str:
    lines = [*summary(results, plan), "", *_starts(results), "", "## Server starts"]
    for s in results.starts:
        lines += server_lines(s.server)
    return "\n".join(lines) + "\n"
