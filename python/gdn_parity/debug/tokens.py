"""Token ids as sglang#35150 compares them: its hash, and the first index where two outputs part."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence


def ids_sha256(ids: Sequence[int]) -> str:
    """``sha256(",".join(map(str, ids)))``, as the issue hashes inputs and outputs."""
    return hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()


def first_divergence(base: Sequence[int], spec: Sequence[int]) -> int | None:
    """The first index where the two outputs differ (a length difference counts)."""
    for i, (x, y) in enumerate(zip(base, spec, strict=False)):
        if x != y:
            return i
    return None if len(base) == len(spec) else min(len(base), len(spec))
