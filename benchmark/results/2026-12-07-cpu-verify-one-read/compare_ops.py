"""Compare the floating-point and MMA instructions of decode's stage-1 PTX with the verify
kernel's at ROWS rows: usage compare_ops.py DECODE.ptx VERIFY.ptx ROWS.

Prints whether the verify kernel's multiset is ROWS times decode's, and the instructions
where it is not (conversions of the K and V tiles, shared by the rows, are expected there).
"""

from __future__ import annotations

import collections
import re
import sys

FLOAT = re.compile(r"f16|bf16|f32|e4m3|mma")
OP = re.compile(
    r"\s*(?:@!?%p\d+\s+)?((?:mma\.sync|ex2|lg2|max|min|fma|add|mul|sub|div|rcp|cvt|selp)"
    r"[a-z0-9._]*)"
)


def ops(path: str) -> collections.Counter:
    found = collections.Counter()
    for line in open(path):
        m = OP.match(line)
        if m and FLOAT.search(m.group(1)) and not m.group(1).startswith("selp"):
            found[m.group(1)] += 1
    return found


def main() -> None:
    decode, verify, rows = ops(sys.argv[1]), ops(sys.argv[2]), int(sys.argv[3])
    other = {k: (rows * decode[k], verify[k]) for k in decode | verify if rows * decode[k] != verify[k]}
    print("same" if not other else "other: " + ", ".join(f"{k} {a}->{b}" for k, (a, b) in sorted(other.items())))


if __name__ == "__main__":
    main()
