"""The exact request of sglang#35150, and the issue's way of hashing token ids."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

INPUT_IDS = (
    248045, 846, 198, 623, 799, 61446, 13901, 11,
    10033, 3069, 10583, 5802, 4833, 5983, 13, 248046,
    198, 248045, 74455, 198, 248068, 271, 248069, 271,
)  # fmt: skip
INPUT_SHA256 = "f3d5baaf2ddb361d0d9fbff4add8071e24718908f76ae350ced01927dd87fcd0"
MAX_NEW_TOKENS = 96


def ids_sha256(ids: Sequence[int]) -> str:
    """``sha256(",".join(map(str, ids)))``, as the issue hashes inputs and outputs."""
    return hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()


def first_divergence(base: Sequence[int], spec: Sequence[int]) -> int | None:
    """The first index where the two outputs differ (a length difference counts)."""
    for i, (x, y) in enumerate(zip(base, spec, strict=False)):
        if x != y:
            return i
    return None if len(base) == len(spec) else min(len(base), len(spec))
