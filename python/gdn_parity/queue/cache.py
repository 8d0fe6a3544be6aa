"""Where gdn-parity keeps the base wheel and the trees it materialises."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


def cache_dir() -> Path:
    """``$GDN_PARITY_CACHE``, else ``~/.cache/gdn-parity``."""
    env = os.environ.get("GDN_PARITY_CACHE")
    path = Path(env) if env else Path.home() / ".cache" / "gdn-parity"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def cache_lock() -> Iterator[None]:
    """Hold the cache's lock, so that processes that build the base or a tree in the cache
    at the same time (two demos started together) build it once, one after the other."""
    with (cache_dir() / ".lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
