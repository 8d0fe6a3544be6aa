"""Imports run one way: queue and debug never import drift; nothing imports cli.

Read from the source (every ``import`` and ``from ... import``, at any depth),
so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "gdn_parity"
# A package's modules may not import these packages.
FORBIDDEN = {
    "queue": {"gdn_parity.drift", "gdn_parity.debug", "gdn_parity.apply", "gdn_parity.cli"},
    "debug": {"gdn_parity.drift", "gdn_parity.apply", "gdn_parity.cli"},
    "apply": {"gdn_parity.drift", "gdn_parity.debug", "gdn_parity.cli"},
    "sandbox": {"gdn_parity.drift", "gdn_parity.apply", "gdn_parity.cli"},
    "drift": {"gdn_parity.cli", "gdn_parity.apply"},
}


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _modules(package: str) -> list[Path]:
    return sorted((PACKAGE / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_module_imports_upward(package):
    modules = _modules(package)
    assert modules, f"no package {package}"
    bad = [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in modules
        for name in sorted(_imports(path))
        if any(name == f or name.startswith(f + ".") for f in FORBIDDEN[package])
    ]
    assert not bad, bad


def test_nothing_outside_cli_imports_cli():
    outside = [p for p in PACKAGE.rglob("*.py") if "cli" not in p.relative_to(PACKAGE).parts]
    bad = [p for p in outside if any(n.startswith("gdn_parity.cli") for n in _imports(p))]
    assert not bad, bad


def test_the_rule_sees_a_lazy_upward_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from gdn_parity.drift.run import loops\n")
    assert "gdn_parity.drift.run" in _imports(module)
