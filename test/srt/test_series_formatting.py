"""The series' Python files are formatted the way upstream formats them (black, isort).

sglang 0.5.23 itself is not uniformly black-clean, so the rule is: a patched
file may need no reformatting that its base version did not already need.
Upstream's pre-commit runs isort (profile black, first party sglang) and black.
Nor may a patch re-lay base lines it does not change (the same tokens with other
line breaks), as running a formatter over a whole file does.
"""

from __future__ import annotations

import difflib
import re
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


def _tokens(line: str) -> str:
    """A line without its layout: no whitespace, brackets' parentheses or commas."""
    return re.sub(r"[\s(),]", "", line)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _prefix_tokens(lines: list[str]) -> dict[str, int]:
    """The tokens of each leading run of ``lines``, to the run's length (the shortest)."""
    runs, tokens = {}, ""
    for n, line in enumerate(lines, 1):
        tokens += _tokens(line)
        if tokens:
            runs.setdefault(tokens, n)
    return runs


def _relaid_runs(before: list[str], after: list[str]) -> list[list[str]]:
    """The longest run at the start, and at the end, of a replaced block that the patch
    lays out anew with the same tokens at the same indentation (a re-indent moves code
    into another block: not this)."""
    found = []
    for sign in (1, -1):
        old, new = before[::sign], after[::sign]
        flip = (lambda line: line) if sign == 1 else (lambda line: line[::-1])
        old_runs = _prefix_tokens([flip(line) for line in old])
        new_runs = _prefix_tokens([flip(line) for line in new])
        runs = [
            (old[: old_runs[t]][::sign], new[: new_runs[t]][::sign])
            for t in sorted(old_runs.keys() & new_runs.keys(), key=len, reverse=True)
        ]
        relaid = [o for o, n in runs if o != n and _indent(o[0]) == _indent(n[0])]
        found += relaid[:1]
    return found


def relaid_lines(before: str, after: str) -> list[list[str]]:
    """Base lines that ``after`` only reformats: the same tokens, other line breaks."""
    old, new = before.splitlines(), after.splitlines()
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    return [
        run
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag == "replace"
        for run in _relaid_runs(old[i1:i2], new[j1:j2])
    ]


def test_patches_do_not_reformat_lines_they_do_not_change(series_tree):
    """A formatter run over a whole file re-lays upstream lines the patch has no reason
    to touch (another formatter than upstream's breaks a long assert differently)."""
    problems = [
        f"{change.path}: {run[0].strip()}"
        for change in series_changes(series_tree)
        if change.path.endswith(".py") and change.before and change.after
        for run in relaid_lines(change.before.decode(), change.after.decode())
    ]
    assert not problems, problems


def test_the_relayout_check_sees_a_reformatted_assert_and_leaves_moved_code_alone():
    before = 'def f(x):\n    assert x, (\n        "msg"\n    )\n    y = 1\n'
    relaid = 'def f(x):\n    assert (\n        x\n    ), "msg"\n    z = 2\n'
    assert [run[0] for run in relaid_lines(before, relaid)] == ["    assert x, ("]
    nested = 'def f(x):\n    if x:\n        assert x, (\n            "msg"\n        )\n    y = 1\n'
    assert relaid_lines(before, nested) == []


def test_the_check_sees_badly_formatted_code():
    assert _reformat_lines("black", b"x = ( 1,2 )\n")
    assert _reformat_lines("isort", b"import sys\nimport os\n")
