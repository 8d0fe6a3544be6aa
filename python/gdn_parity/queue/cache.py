"""Where gdn-parity keeps the base wheel and the trees it materialises."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from gdn_parity.errors import GdnParityError


def cache_dir() -> Path:
    """``$GDN_PARITY_CACHE``, else ``~/.cache/gdn-parity``, as an absolute path: git runs
    in the cache's trees, where a relative path would name another directory."""
    env = os.environ.get("GDN_PARITY_CACHE")
    path = Path(env).expanduser().absolute() if env else Path.home() / ".cache" / "gdn-parity"
    if path.exists() and not path.is_dir():
        raise GdnParityError(f"the cache {path} (GDN_PARITY_CACHE) is not a directory")
    return path  # made by the first writer, so a refused command leaves no cache behind


@contextlib.contextmanager
def cache_lock() -> Iterator[None]:
    """Hold the cache's lock, so that processes that build the base or a tree in the cache
    at the same time (two demos started together) build it once, one after the other."""
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
