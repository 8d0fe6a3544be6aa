"""Where gdn-parity keeps the base wheel and the trees it materialises."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$GDN_PARITY_CACHE``, else ``~/.cache/gdn-parity``."""
    env = os.environ.get("GDN_PARITY_CACHE")
    path = Path(env) if env else Path.home() / ".cache" / "gdn-parity"
    path.mkdir(parents=True, exist_ok=True)
    return path
