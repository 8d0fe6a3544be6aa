"""What an earlier cost run in the same ``--out`` already measured, for ``server-cost
--resume``: a plan longer than one GPU lease runs over several, and renders one table.

A start is kept when it ran exactly what the plan's start would run now (the same
fingerprint: interpreter, common and own flags and environment, model, dtypes, accept length
and the benchmarks it times) and every one of its cells was timed. Any other earlier start is
dropped with its cells and runs again; so is one the plan no longer names.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from gdn_parity.errors import GdnParityError
from gdn_parity.servercost.plan import CostPlan
from gdn_parity.servercost.results import Cell, CostResults, StartResult
from gdn_parity.servercost.schedule import CostStart


@dataclasses.dataclass(frozen=True)
class KeptStart:
    """An earlier start whose results stand: its record and its cells."""

    start: StartResult
    cells: list[Cell]


def start_fingerprint(plan: CostPlan, start: CostStart) -> str:
    """A digest of everything that decides what ``start`` measures."""
    server = dataclasses.asdict(plan.servers[start.server])
    what = {
        "python": plan.python,
        "request_timeout": plan.request_timeout,
        "common_args": list(plan.common_args),
        "common_env": dict(plan.common_env),
        "size": plan.size,
        "ssm_dtype": plan.ssm_dtype,
        "kv_cache_dtype": plan.kv_cache_dtype,
        "server": server,
        "accept_length": start.accept_length,
        "benchmarks": [
            dataclasses.asdict(b) for b in plan.benchmarks if b.name in start.benchmarks
        ],
    }
    text = json.dumps(what, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def read_earlier(path: Path) -> CostResults:
    """``path``'s results; a one-line error when it is missing or not a cost run's."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise GdnParityError(
            f"--resume: cannot read {path} ({exc.strerror}): resume names the --out of an "
            "earlier server-cost run"
        ) from None
    try:
        return CostResults.from_json(text)
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        raise GdnParityError(f"--resume: {path} is not a server-cost results.json: {exc}") from None


def kept_starts(
    earlier: CostResults, plan: CostPlan, starts: list[CostStart]
) -> tuple[dict[str, KeptStart], list[str]]:
    """The earlier starts that stand, by label, and a line for each one dropped."""
    wanted = {s.label: start_fingerprint(plan, s) for s in starts}
    kept: dict[str, KeptStart] = {}
    dropped: list[str] = []
    for record in earlier.starts:
        label = record.server.label
        cells = [c for c in earlier.cells if c.start == label]
        why = _why_not_kept(record, cells, wanted.get(label))
        if why is None:
            kept[label] = KeptStart(record, cells)
        else:
            dropped.append(f"{label}: {why}")
    return kept, dropped


def _why_not_kept(record: StartResult, cells: list[Cell], fingerprint: str | None) -> str | None:
    if fingerprint is None:
        return "the plan no longer runs it"
    if record.server.failure:
        return "it failed"
    if record.bandwidth is None:
        return "it has no copy bandwidth"
    if not cells or any(c.measured is None for c in cells):
        return "not every batch was timed"
    if record.fingerprint != fingerprint:
        return "the plan changed what it runs"
    return None
