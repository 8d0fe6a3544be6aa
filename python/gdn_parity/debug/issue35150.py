"""The exact request of sglang#35150."""

from __future__ import annotations

INPUT_IDS = (
    248045, 846, 198, 623, 799, 61446, 13901, 11,
    10033, 3069, 10583, 5802, 4833, 5983, 13, 248046,
    198, 248045, 74455, 198, 248068, 271, 248069, 271,
)  # fmt: skip
INPUT_SHA256 = "f3d5baaf2ddb361d0d9fbff4add8071e24718908f76ae350ced01927dd87fcd0"
MAX_NEW_TOKENS = 96
