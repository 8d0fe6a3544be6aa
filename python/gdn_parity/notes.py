"""Progress notes for the user, on stderr: what a slow first run is doing.

A note names the verb that makes it (``gdn-parity tree: applying ...``), as the verb's
warnings and errors do, once the command line has named it (``speak_for``).
"""

from __future__ import annotations

import sys

_prog = "gdn-parity"


def speak_for(prog: str) -> None:
    """Notes from here on begin ``prog: `` (``gdn-parity VERB``)."""
    global _prog
    _prog = prog


def note(message: str) -> None:
    print(f"{_prog}: {message}", file=sys.stderr, flush=True)
