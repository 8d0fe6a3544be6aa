"""The series' own CPU-registered upstream tests pass on the patched tree.

Every test file the series adds under ``test/registered/`` that calls
``register_cpu_ci`` is run with unittest from the tree, each in an interpreter of
its own as upstream's CI runs it (``helpers.registered``). The files are listed
at collection from the patches' text (no tree is built then); a test checks that
list against the tree, and fails if the series registers none.
"""

from __future__ import annotations

import ast
import re

import pytest

from gdn_parity.queue.changes import series_changes
from gdn_parity.queue.series import load_series
from helpers.registered import run_registered

REGISTERED = "test/registered/"


def _registered_for(source: str, marker: str) -> bool:
    return any(
        isinstance(node, ast.Call) and getattr(node.func, "id", None) == marker
        for node in ast.walk(ast.parse(source))
    )


def _cpu_test_files_in_the_patches() -> list[str]:
    """New files under test/registered/ whose added lines call register_cpu_ci."""
    files = set()
    for path in load_series().patch_paths():
        for diff in re.split(r"^diff --git ", path.read_text(), flags=re.MULTILINE)[1:]:
            name = diff.split("\n", 1)[0].split(" b/", 1)[1]
            added = "\n".join(
                line[1:] for line in diff.splitlines() if line.startswith("+") and line[1:3] != "++"
            )
            if name.startswith(REGISTERED) and "register_cpu_ci(" in added:
                files.add(name)
    return sorted(files)


CPU_TEST_FILES = _cpu_test_files_in_the_patches()


def test_the_series_registers_cpu_tests_and_the_list_is_the_trees(series_tree):
    in_tree = sorted(
        change.path
        for change in series_changes(series_tree)
        if change.path.startswith(REGISTERED)
        and change.after is not None
        and _registered_for(change.after.decode(), "register_cpu_ci")
    )
    assert in_tree, "the series registers no CPU test under test/registered/"
    assert CPU_TEST_FILES == in_tree


@pytest.mark.parametrize("path", CPU_TEST_FILES)
def test_upstream_cpu_test_file_passes(sglang_tree, path):
    run = run_registered(sglang_tree, path)
    assert run.ran > 0, run.output[-4000:]
    assert not run.failed, (run.failed, run.output[-8000:])
    assert not run.skipped, run.skipped
