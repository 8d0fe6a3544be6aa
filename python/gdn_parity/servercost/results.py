"""What a cost run found, as typed data: per server start, per (benchmark, batch) cell, per
run of a batch, per request; and the table's rows with their ratios.

``results.json`` is ``asdict`` of ``CostResults``; ``report.py`` renders ``results.md`` from it.
``CostResults.from_json`` reads it back (``server-cost --resume``), each field as its type says.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import asdict, dataclass, field
from typing import Any

from gdn_parity.realserver.results import ServerRun


@dataclass(frozen=True)
class RequestTiming:
    """One request of one run, from its ``meta_info``."""

    e2e_s: float  # e2e_latency: the tokenizer manager's, from receipt to the last token
    completion_tokens: int
    verify_ct: int | None  # spec_verify_ct: the verify steps; None on Base
    retractions: int  # num_retractions: > 0 means the KV pool ran out mid-run


@dataclass(frozen=True)
class RunTiming:
    """A batch sent once, every request asking for ``new_tokens``."""

    new_tokens: int
    requests: list[RequestTiming]


@dataclass(frozen=True)
class Repeat:
    """One short and one long run of the same prompts, each after a cache flush."""

    short: RunTiming
    long: RunTiming


@dataclass(frozen=True)
class Spread:
    """The median over repeats, with the lowest and the highest."""

    median: float
    low: float
    high: float


@dataclass(frozen=True)
class Measured:
    """A cell's costs (``timing``): medians over repeats, with their spread."""

    tpot_ms: Spread  # time per output token of a request
    step_ms: Spread  # time per step: a verify on DSpark, a token on Base
    tokens_per_step: float  # measured: the median over repeats


@dataclass(frozen=True)
class Bandwidth:
    """A device-to-device copy's bytes/s, reads and writes counted, on the servers' GPU."""

    bytes_per_s: float
    device: str
    software: str | None = None  # "torch X, triton Y" in the servers' environment


@dataclass(frozen=True)
class Floor:
    """The least a step can cost: the bytes it must move over the copy bandwidth."""

    context: int  # committed tokens per request: the mean over the timed window
    width: int  # rows per request a step runs: 1, or gamma + 1
    weights: int  # bytes
    state: int
    kv: int
    bytes_per_s: float
    step_ms: float
    token_ms: float  # step_ms over the tokens a step commits


@dataclass
class Cell:
    """One batch size of one benchmark on one server start."""

    benchmark: str
    server: str
    start: str  # the start's label
    mode: str
    gamma: int | None
    accept_length: int | None  # SGLANG_SIMULATE_ACC_LEN; None on Base
    batch: int
    repeats: list[Repeat] = field(default_factory=list)
    measured: Measured | None = None
    retractions: int = 0  # over every timed run
    floor: Floor | None = None
    not_run: str | None = None


@dataclass
class StartResult:
    server: ServerRun
    name: str  # the plan's server
    accept_length: int | None
    bandwidth: Bandwidth | None = None
    bandwidth_problem: str | None = None
    # What the start ran, as a digest (``resume.start_fingerprint``); None in results
    # written before fingerprints existed.
    fingerprint: str | None = None


@dataclass(frozen=True)
class Row:
    """A row of the table: a cell that ran, with its ratios."""

    benchmark: str
    server: str
    gamma: int | None
    accept_length: int | None
    batch: int
    measured: Measured
    floor: Floor | None
    vs_baseline: float | None  # TPOT over the baseline's at this batch
    vs_twin: float | None  # TPOT over the twin's without the contract, same batch and length
    retractions: int


@dataclass
class CostResults:
    plan: str
    out: str
    complete: bool = False
    interrupted: str | None = None
    events: list[str] = field(default_factory=list)
    starts: list[StartResult] = field(default_factory=list)
    cells: list[Cell] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)

    def problem(self) -> str | None:
        """Why the run is incomplete (exit status 2), or None."""
        failed = [s.server.label for s in self.starts if s.server.failure]
        if failed:
            return f"server {failed[0]} did not serve ({len(failed)} start(s) failed)"
        unmeasured = [s for s in self.starts if s.bandwidth_problem]
        if unmeasured:
            s = unmeasured[0]
            return f"no copy bandwidth before {s.server.label}, so no floor: {s.bandwidth_problem}"
        missing = [c for c in self.cells if c.not_run]
        if missing:
            c = missing[0]
            return (
                f"{len(missing)} cell(s) not run; the first: {c.benchmark}, {c.start}, batch "
                f"{c.batch}: {c.not_run}"
            )
        if not self.complete:
            return f"the run stopped early ({self.interrupted or 'unknown'})"
        return None

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> CostResults:
        """``to_json``'s text back as typed data; ValueError names the first field that does
        not fit its type."""
        return _decode(cls, json.loads(text), "results")


def _decode(kind: Any, value: Any, where: str) -> Any:
    """``value`` (parsed JSON) as ``kind``: a dataclass, ``list[X]``, ``dict[str, X]``, ``X |
    None`` or a scalar. An int is taken where a float is due: a field that held an int was
    written as one."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _decode(inner, value, where)
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected an object, got {type(value).__name__}")
        hints = typing.get_type_hints(kind)
        known = {f.name for f in dataclasses.fields(kind)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"{where}: unknown field {unknown[0]!r}")
        fields = {k: _decode(hints[k], v, f"{where}.{k}") for k, v in value.items()}
        missing = [
            f.name
            for f in dataclasses.fields(kind)
            if f.name not in value
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ]
        if missing:
            raise ValueError(f"{where}: missing field {missing[0]!r}")
        return kind(**fields)
    if origin is list:
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected a list, got {type(value).__name__}")
        return [_decode(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict or kind is dict:
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected an object, got {type(value).__name__}")
        inner = args[1] if args else Any
        return {k: _decode(inner, v, f"{where}.{k}") for k, v in value.items()}
    if kind is Any:
        return value
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{where}: expected {kind.__name__}, got {type(value).__name__}")
    return value
