"""The series' Python files are formatted the way upstream formats them (black, isort).

sglang 0.5.23 itself is not uniformly black-clean, so the rule is: a patched
file may need no reformatting that its base version did not already need.
Upstream's pre-commit runs isort (profile black, first party sglang) and black.
"""

from __future__ import annotations

import difflib
import subprocess
import sys

import pytest

from gdn_parity.queue.changes import series_changes

FORMATTERS = {
    "black": [sys.executable, "-m", "black", "--quiet", "-"],
    "isort": [sys.executable, "-m", "isort", "--profile", "black", "-p", "sglang", "-"],
}


def _reformat_lines(formatter: str, source: bytes | None) -> set[str]:
    """The lines the formatter would remove or add: what it objects to."""
    if source is None:
        return set()
    proc = subprocess.run(FORMATTERS[formatter], input=source, capture_output=True, check=True)
    before = source.decode().splitlines()
    after = proc.stdout.decode().splitlines()
    return {
        line
        for line in difflib.unified_diff(before, after, lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    }


@pytest.mark.parametrize("formatter", sorted(FORMATTERS))
def test_patched_files_need_no_new_reformatting(series_tree, formatter):
    problems = []
    python_changes = [c for c in series_changes(series_tree) if c.path.endswith(".py") and c.after]
    for change in python_changes:
        new = _reformat_lines(formatter, change.after) - _reformat_lines(formatter, change.before)
        if new:
            problems.append(f"{change.path}:\n  " + "\n  ".join(sorted(new)))
    assert not problems, f"{formatter} would reformat lines the series added:\n" + "\n".join(
        problems
    )


def test_the_check_sees_badly_formatted_code():
    assert _reformat_lines("black", b"x = ( 1,2 )\n")
    assert _reformat_lines("isort", b"import sys\nimport os\n")
