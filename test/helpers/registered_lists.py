"""The module-level list constants of a registered CUDA test, read from its source.

The CPU tests check that a registered test's shapes and row counts reach every tile a
rule can pick. Those files import sglang's test package, so they are read, not
imported: each ``NAME = [...]`` literal, extended by each ``NAME += [...]``.
"""

from __future__ import annotations

import ast
from pathlib import Path


def literal_lists(path: Path) -> dict[str, list]:
    """Every module-level name of ``path`` bound to a list literal, with its additions."""
    names: dict[str, list] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.List):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = ast.literal_eval(node.value)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            if node.target.id in names and isinstance(node.op, ast.Add):
                names[node.target.id] += ast.literal_eval(node.value)
    return names
