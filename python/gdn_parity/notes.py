"""Progress notes for the user, on stderr: what a slow first run is doing."""

from __future__ import annotations

import sys


def note(message: str) -> None:
    print(f"gdn-parity: {message}", file=sys.stderr, flush=True)
