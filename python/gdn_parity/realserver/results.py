"""What a run found, as typed data: per server start, per comparison, per batch, per request.

``results.json`` is ``asdict`` of ``RunResults``; ``report.py`` renders ``results.md`` from it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

EXIT_HOLDS = 0
EXIT_MISSED = 1  # a comparison ran and did not meet its expectation
EXIT_INCOMPLETE = 2  # a server did not come up, a request failed, a trace was missing, ...


@dataclass(frozen=True)
class StatePoint:
    """A GDN state of the speculative server's trace: ``pos`` absorbed tokens, one layer."""

    pos: int
    layer: int
    checkpoint: str
    step: int | None

    def describe(self) -> str:
        step = "" if self.step is None else f"[{self.step}]"
        return f"pos {self.pos}, layer {self.layer}, {self.checkpoint}{step}"


@dataclass(frozen=True)
class TraceCheck:
    """One request's states, speculative against Base (``gdn_parity.debug.trace_diff``)."""

    compared: int
    first: StatePoint | None  # the first state that differs
    first_committed: StatePoint | None  # the first committed one (not a verify step's)
    problem: str | None = None  # why nothing was compared


@dataclass(frozen=True)
class RequestResult:
    index: int
    rid: str
    prompt_len: int
    prompt_sha256: str
    base_sha256: str
    spec_sha256: str
    base_tokens: int
    spec_tokens: int
    first_divergence: int | None  # output index; None: identical
    base_distinct: int  # distinct token ids in the output
    spec_distinct: int
    base_completion_tokens: int | None  # meta_info's
    spec_completion_tokens: int | None
    spec_metrics: dict  # meta_info's spec_* fields
    trace: TraceCheck | None


@dataclass(frozen=True)
class Capacity:
    """What a server says it holds (``GET /server_info``); None: it did not say."""

    max_running_requests: int | None
    token_capacity: int | None


@dataclass(frozen=True)
class BatchResult:
    batch: int
    requests: list[RequestResult]
    error: str | None  # the batch could not be compared in full
    identical: int  # requests whose outputs are equal
    first_divergence: int | None  # the smallest over requests
    distinct_min: int | None  # of Base's outputs
    distinct_median: float | None
    accept_rate: float | None  # the mean of spec_accept_rate over requests
    accept_length: float | None
    states: str  # "not traced", "bitwise equal at K compared states", "differ first at ..."
    observed: str | None  # "identical" or "diverge"; None when nothing was compared
    met: bool
    # The most requests both servers can run at once, by their declared limits
    # (``capacity.at_once``); None: a server did not say. Below ``batch``, the rest queued.
    at_once: int | None = None
    limited_by: str | None = None  # the server start whose limit that is


@dataclass
class ComparisonResult:
    name: str
    base: str  # the server starts compared (their labels)
    spec: str
    expect: str
    max_new_tokens: int
    prompt_len: int
    prompt_seed: int
    prompt_vocab: int
    reference: str = "batch"  # "alone": the base side got each request alone
    batches: list[BatchResult] = field(default_factory=list)
    not_run: str | None = None
    verdict: str = "not run"  # "met", "missed", "incomplete" (some batch did not compare)

    @property
    def missed(self) -> bool:
        """It ran, and what it saw is not what it expected."""
        return any(b.error is None and not b.met for b in self.batches)

    def judge(self) -> None:
        """Set ``verdict`` from the batches that ran."""
        if self.missed:
            self.verdict = "missed"
        elif self.not_run or any(b.error for b in self.batches) or not self.batches:
            self.verdict = "incomplete" if self.batches else "not run"
        else:
            self.verdict = "met"


@dataclass
class ServerRun:
    label: str  # the name, -2 from its second start on
    mode: str
    gamma: int | None
    argv: list[str]
    env: dict[str, str]  # set over the runner's environment
    cwd: str
    log: str
    trace_dir: str | None
    port: int
    up_after_s: float | None = None
    capacity: Capacity | None = None
    failure: str | None = None
    log_tail: list[str] = field(default_factory=list)
    stopped: str | None = None
    leftover: list[int] = field(default_factory=list)  # pids alive after the stop


@dataclass
class RunResults:
    plan: str
    out: str
    complete: bool = False
    interrupted: str | None = None
    events: list[str] = field(default_factory=list)
    servers: list[ServerRun] = field(default_factory=list)
    comparisons: list[ComparisonResult] = field(default_factory=list)

    def problem(self) -> str | None:
        """The first thing that kept the run from judging every comparison, or None."""
        for server in self.servers:
            if server.failure:
                return f"{server.failure} (its log: {server.log})"
            if server.leftover:
                return (
                    f"processes {server.leftover} of server {server.label} were alive after "
                    "its stop"
                )
        for c in self.comparisons:
            if c.not_run:
                return f"comparison {c.name} did not run: {c.not_run}"
            for b in c.batches:
                if b.error:
                    return f"comparison {c.name}, batch {b.batch}: {b.error}"
        if not self.complete:
            return f"the run stopped early ({self.interrupted or 'unknown'})"
        return None

    def exit_status(self) -> int:
        if any(c.missed for c in self.comparisons):
            return EXIT_MISSED
        return EXIT_INCOMPLETE if self.problem() else EXIT_HOLDS

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"
