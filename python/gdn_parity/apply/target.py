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
from gdn_parity.queue.git import is_git_repo
from gdn_parity.queue.series import Series


class State(Enum):
    UNPATCHED = "unpatched"
    PATCHED = "patched"
    MODIFIED = "modified"


@dataclass(frozen=True)
class Status:
    state: State
    details: list[str] = field(default_factory=list)


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


def require(status: Status, wanted: State, refusals: dict[State, str]) -> None:
    """Raise the refusal for ``status``'s state (with its details) unless it is ``wanted``."""
    if status.state is not wanted:
        details = "; ".join(status.details)
        raise GdnParityError(refusals[status.state] + (": " + details if details else ""))


def file_status(
    changes: list[FileChange],
    current: Callable[[FileChange], bytes | None],
    name: Callable[[FileChange], str],
    neither: str,
    applied: bool | None = None,
) -> Status:
    """The three-state check over ``changes``; ``applied`` is the target's own record, if any.

    A modified target's details name every file that holds ``neither`` of its two versions.
    """
    found = {c.path: current(c) for c in changes}
    if all(found[c.path] == c.before for c in changes) and applied is not True:
        return Status(State.UNPATCHED)
    if all(found[c.path] == c.after for c in changes) and applied is not False:
        return Status(State.PATCHED)
    return Status(
        State.MODIFIED,
        [
            f"{name(c)}: matches neither {neither}"
            for c in changes
            if found[c.path] not in (c.before, c.after)
        ],
    )


def open_target(path: Path, series: Series) -> Target:
    """A git checkout's top level is a checkout; any other directory an installed package.

    The target is checked (``Target.check``) before it is returned.
    """
    from gdn_parity.apply.checkout import CheckoutTarget
    from gdn_parity.apply.package import PackageTarget

    if not path.exists():
        raise GdnParityError(f"{path} does not exist")
    if not path.is_dir():
        raise GdnParityError(f"{path} is not a directory: name an sglang checkout or package")
    target: Target = (
        CheckoutTarget(path, series) if is_git_repo(path) else PackageTarget(path, series)
    )
    target.check()
    return target
