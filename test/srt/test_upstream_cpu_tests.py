"""The series' own CPU-registered upstream tests pass on the patched tree.

Every test file the series adds under ``test/registered/`` that calls
``register_cpu_ci`` is loaded from the tree and run with unittest.
"""

from __future__ import annotations

import ast
import importlib.util
import unittest
from pathlib import Path

import pytest

from gdn_parity.plan import series_changes
from gdn_parity.series import load_series
from gdn_parity.tree import materialise_tree


def _registered_for(source: str, marker: str) -> bool:
    return any(
        isinstance(node, ast.Call) and getattr(node.func, "id", None) == marker
        for node in ast.walk(ast.parse(source))
    )


def _cpu_test_files() -> list[str]:
    tree = materialise_tree(load_series())
    return sorted(
        change.path
        for change in series_changes(tree)
        if change.path.startswith("test/registered/")
        and change.after is not None
        and _registered_for(change.after.decode(), "register_cpu_ci")
    )


@pytest.mark.parametrize("path", _cpu_test_files())
def test_upstream_cpu_test_file_passes(sglang_tree, path):
    spec = importlib.util.spec_from_file_location(Path(path).stem, sglang_tree / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    assert suite.countTestCases() > 0
    result = unittest.TextTestRunner(verbosity=0).run(suite)
    failures = [str(test) for test, _ in result.failures + result.errors]
    assert result.wasSuccessful(), failures
    assert not result.skipped, result.skipped
