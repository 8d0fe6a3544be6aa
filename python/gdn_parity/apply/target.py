"""What every apply target is: a place the series can be applied to, reverted from, and checked.

The state of a target is read the same way for both kinds: every file the series
touches holds either its base bytes (unpatched), its patched bytes (patched), or
a mix or other bytes (modified).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Protocol

from gdn_parity.errors import GdnParityError
from gdn_parity.queue.changes import FileChange


class State(Enum):
    UNPATCHED = "unpatched"
    PATCHED = "patched"
    MODIFIED = "modified"


class Holds(Enum):
    """What one file the series touches holds."""

    BASE = "base"
    SERIES = "series"
    NEITHER = "neither"


@dataclass(frozen=True)
class Status:
    """A target's state, and how many of the files the series touches hold what.

    When modified: ``details`` name every file that holds neither version, or the other
    version than the target's record says (the base's without one), and ``note`` says,
    where the target knows, what that state means and what to do.
    """

    state: State
    holding: dict[Holds, int]
    details: list[str] = field(default_factory=list)
    note: str = ""


@dataclass(frozen=True)
class Done:
    """What an apply or a revert changed: how many patches or files, and the line to print."""

    count: int
    summary: str


class Target(Protocol):
    path: Path

    def check(self) -> None:
        """Refuse a path the series cannot apply to (what ``status`` and ``apply`` both check)."""

    def status(self, changes: list[FileChange]) -> Status:
        """The target's state against the series' changes."""

    def apply(self, changes: list[FileChange]) -> Done:
        """Apply the series, all or nothing."""

    def revert(self, changes: list[FileChange]) -> Done:
        """Restore the base, all or nothing."""


SHOWN_IN_A_REFUSAL = 3


def refusal_line(refusal: str, status: Status) -> str:
    """``refusal``, the status' note and its first files, on one line."""
    line = refusal + (": " + status.note if status.note else "")
    if status.details:
        shown = status.details[:SHOWN_IN_A_REFUSAL]
        more = len(status.details) - len(shown)
        line += ": " + "; ".join(shown)
        line += f"; and {more} more (`gdn-parity status` names them all)" if more else ""
    return line


def require(status: Status, wanted: State, refusals: dict[State, str]) -> None:
    """Unless ``status`` is in the ``wanted`` state, raise its state's refusal (one line)."""
    if status.state is not wanted:
        raise GdnParityError(refusal_line(refusals[status.state], status))


def files_hold(status: Status, kind: Holds) -> str:
    """``every file the series touches holds`` or ``N of the M files ... hold(s)``."""
    count, total = status.holding[kind], sum(status.holding.values())
    if count == total:
        return "every file the series touches holds"
    return f"{count} of the {total} files the series touches hold" + "s" * (count == 1)


def _holds(change: FileChange, found: bytes | None) -> Holds:
    if found == change.before:
        return Holds.BASE
    return Holds.SERIES if found == change.after else Holds.NEITHER


def _what(holds: Holds, found: bytes | None, neither: str) -> str:
    if holds is Holds.NEITHER:
        return f"matches neither {neither}"
    if found is None:
        return "is absent, as in the base" if holds is Holds.BASE else "is absent, as in the series"
    return "holds the base's bytes" if holds is Holds.BASE else "holds the series' bytes"


def file_status(
    changes: list[FileChange],
    current: Callable[[FileChange], bytes | None],
    name: Callable[[FileChange], str],
    neither: str,
    applied: bool | None = None,
) -> Status:
    """The three-state check over ``changes``; ``applied`` is the target's own record, if any.

    A modified target's details name every file that holds ``neither`` of its two
    versions, and every file that holds the other version than the record says: the
    series' where there is no record of an apply, the base's where there is one.
    """
    found = {c.path: current(c) for c in changes}
    holds = {c.path: _holds(c, found[c.path]) for c in changes}
    holding = {kind: list(holds.values()).count(kind) for kind in Holds}
    if holding[Holds.BASE] == len(changes) and applied is not True:
        return Status(State.UNPATCHED, holding)
    if holding[Holds.SERIES] == len(changes) and applied is not False:
        return Status(State.PATCHED, holding)
    expected = Holds.SERIES if applied else Holds.BASE
    return Status(
        State.MODIFIED,
        holding,
        details=[
            f"{name(c)}: {_what(holds[c.path], found[c.path], neither)}"
            for c in changes
            if holds[c.path] is not expected
        ],
    )
