"""One line from a registered-result JSON (stdin): failed subtests per test method and shape
(GQA: 4 q heads over 2 KV heads; MHA: 2 over 2)."""

import collections
import json
import re
import sys

result = json.load(sys.stdin)
failed = collections.Counter(
    (re.search(r"\.(test_\w+)", f).group(1), "MHA" if "(2, 2," in f else "GQA")
    for f in result["failed"]
)
listed = ", ".join(f"{test} {shape} x{n}" for (test, shape), n in sorted(failed.items()))
print(f"ran {result['ran']} tests; failed subtests: {listed or 'none'}")
