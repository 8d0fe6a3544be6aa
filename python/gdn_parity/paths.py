"""What making a directory creates, so that a verb that fails can take it away again."""

from __future__ import annotations

from pathlib import Path


def first_missing(path: Path) -> Path | None:
    """The outermost of ``path`` and its parents that does not exist (None: ``path`` exists).

    Making ``path`` creates it and everything below it; removing it undoes the making.
    """
    missing = None
    for candidate in (path, *path.parents):
        if candidate.exists():
            break
        missing = candidate
    return missing
