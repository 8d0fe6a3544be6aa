"""What an earlier cost run in the same ``--out`` already measured, for ``server-cost
--resume``: a plan longer than one GPU lease runs over several, and renders one table.

A start is kept when every one of its cells was timed, and it would run the same now: the
same fingerprint and the same GPU and software. The fingerprint covers the server's command
line and environment (its port aside), the content of its sglang tree where that is a git
work tree (its commit's tree and uncommitted changes), the model's geometry and the workload
of each benchmark it times. It does not cover the files of the model, of the draft, or of
the interpreter's site directory beyond the torch and triton versions that the copy probe
reports. A plan spread over leases keeps those as they were.

Any other earlier start is dropped with its cells and runs again; so is one the plan no
longer names.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
from collections.abc import Mapping
from pathlib import Path

from gdn_parity.errors import GdnParityError
from gdn_parity.servercost.launch import start_launch
from gdn_parity.servercost.plan import CostPlan
from gdn_parity.servercost.results import Bandwidth, Cell, CostResults, StartResult
from gdn_parity.servercost.schedule import CostStart

# What a benchmark's cells measure: the rest of its keys (its servers, baseline, contract,
# accept lengths) only say where the cells go.
WORKLOAD = (
    "name", "batches", "prompt_len", "prompt_seed", "prompt_vocab", "short_tokens",
    "long_tokens", "repeats",
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class KeptStart:
    """An earlier start whose results stand: its record and its cells."""

    start: StartResult
    cells: list[Cell]


def tree_content(tree: Path) -> str | None:
    """The tree's committed content and its uncommitted changes, as a digest; None where
    ``tree`` is not a git work tree."""

    def git(*args: str) -> bytes:
        return subprocess.run(
            ["git", "-C", str(tree), *args], capture_output=True, check=True
        ).stdout

    try:
        committed = git("rev-parse", "HEAD^{tree}")
        changes = git("diff", "HEAD", "--binary")
    except (OSError, subprocess.CalledProcessError):
        return None
    return hashlib.sha256(committed + changes).hexdigest()


def _json(value: object) -> object:
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"a fingerprint holds no {type(value).__name__}")


def start_fingerprint(
    plan: CostPlan, start: CostStart, out: Path, environ: Mapping[str, str]
) -> str:
    """A digest of everything that decides what ``start`` measures, as far as the runner
    sees it (the module's docstring says what it does not see)."""
    launch = start_launch(plan, plan.python, start, out, None, environ)
    server = plan.servers[start.server]
    what = {
        "argv": list(launch.argv),
        "env": dict(launch.env),
        "tree": tree_content(server.tree),
        "size": plan.size,
        "benchmarks": [
            {key: getattr(b, key) for key in WORKLOAD}
            for b in plan.benchmarks
            if b.name in start.benchmarks
        ],
    }
    text = json.dumps(what, sort_keys=True, default=_json)
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
    except UnicodeDecodeError:
        raise GdnParityError(
            f"--resume: {path} is not a server-cost results.json: not UTF-8"
        ) from None
    try:
        earlier = CostResults.from_json(text)
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        raise GdnParityError(f"--resume: {path} is not a server-cost results.json: {exc}") from None
    labels = [s.server.label for s in earlier.starts]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise GdnParityError(
            f"--resume: {path} is not a server-cost results.json: start {twice[0]} is in it twice"
        )
    return earlier


def kept_starts(
    earlier: CostResults,
    plan: CostPlan,
    starts: list[CostStart],
    out: Path,
    environ: Mapping[str, str],
) -> tuple[dict[str, KeptStart], list[str]]:
    """The earlier starts that stand, by label, and a line for each one dropped."""
    wanted = {s.label: start_fingerprint(plan, s, out, environ) for s in starts}
    kept: dict[str, KeptStart] = {}
    dropped: list[str] = []
    for record in earlier.starts:
        label = record.server.label
        cells = [c for c in earlier.cells if c.start == label]
        why = _why_not_kept(record, cells, label in wanted, wanted.get(label))
        if why is None:
            kept[label] = KeptStart(record, cells)
        else:
            dropped.append(f"{label}: {why}")
    return kept, dropped


def _why_not_kept(
    record: StartResult, cells: list[Cell], planned: bool, fingerprint: str | None
) -> str | None:
    if not planned:
        return "the plan no longer runs it"
    if record.server.failure:
        return "it failed"
    if record.bandwidth is None:
        return "it has no copy bandwidth"
    if not cells or any(c.measured is None for c in cells):
        return "not every batch was timed"
    if record.fingerprint is None:
        return "the earlier run recorded no fingerprint"
    if record.fingerprint != fingerprint:
        return "the plan changed what it runs"
    return None


def other_machine(record: StartResult, here: Bandwidth) -> str | None:
    """Why ``record`` was measured on another GPU or software than ``here``, or None."""
    there = record.bandwidth
    if there is None or (there.device, there.software) == (here.device, here.software):
        return None
    return (
        f"it ran on {there.device} ({there.software or 'software not recorded'}), this "
        f"machine has {here.device} ({here.software or 'software not recorded'})"
    )
