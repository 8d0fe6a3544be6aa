"""Imports run one way: queue and debug never import drift; realserver never imports drift or
servercost (which imports both); nothing imports cli; no module imports itself through others
(no circle).

Read from the source (every ``import`` and ``from ... import``, at any depth),
so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "python" / "gdn_parity"
# A package's modules may not import these packages.
FORBIDDEN = {
    "queue": {"gdn_parity.drift", "gdn_parity.debug", "gdn_parity.apply", "gdn_parity.cli"},
    "debug": {"gdn_parity.drift", "gdn_parity.apply", "gdn_parity.cli"},
    "apply": {"gdn_parity.drift", "gdn_parity.debug", "gdn_parity.cli"},
    "sandbox": {"gdn_parity.drift", "gdn_parity.apply", "gdn_parity.cli"},
    "drift": {"gdn_parity.cli", "gdn_parity.apply"},
    "realserver": {
        "gdn_parity.drift",
        "gdn_parity.apply",
        "gdn_parity.cli",
        "gdn_parity.servercost",
    },
    "servercost": {"gdn_parity.apply", "gdn_parity.cli"},
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


def _module(path: Path) -> str:
    """``gdn_parity.apply.target`` for ``.../gdn_parity/apply/target.py`` (a package: its
    ``__init__.py``)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``path`` imports: ``from a import b`` imports the
    module ``a.b`` where there is one, else (a name defined in it) the module ``a``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in modules else node.module)
    return found & modules


def _circle(graph: dict[str, set[str]]) -> list[str]:
    """A circle of ``graph`` (module -> the modules it imports), as ``[a, b, ..., a]``;
    ``[]`` when there is none."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str]:
        if module in path:
            return path[path.index(module) :] + [module]
        if module in done:
            return []
        for imported in sorted(graph.get(module, ())):
            circle = visit(imported, path + [module])
            if circle:
                return circle
        done.add(module)
        return []

    for module in sorted(graph):
        circle = visit(module, [])
        if circle:
            return circle
    return []


def test_no_module_imports_itself_through_others():
    paths = {_module(p): p for p in PACKAGE.rglob("*.py")}
    graph = {m: _imported_modules(p, set(paths)) - {m} for m, p in paths.items()}
    assert _circle(graph) == [], " -> ".join(_circle(graph))


def test_the_circle_rule_sees_a_circle_and_only_a_circle(tmp_path):
    assert _circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert _circle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []
    module = tmp_path / "m.py"
    module.write_text("from gdn_parity.cli import main\nfrom gdn_parity.errors import E\n")
    known = {"gdn_parity.cli", "gdn_parity.cli.main", "gdn_parity.errors"}
    assert _imported_modules(module, known) == {"gdn_parity.cli.main", "gdn_parity.errors"}


def test_the_tests_that_drive_the_patched_sglang_are_in_test_srt():
    """The design card's layout: the tests of the patched sglang, one module per patch, are in
    test/srt/ (sglang's own name for them); our package's tests are in a folder per package;
    the tests of benchmark/'s scripts are in test/benchmark/."""
    per_patch = sorted(p.relative_to(TESTS) for p in TESTS.rglob("test_[0-9][0-9][0-9][0-9]_*.py"))
    assert per_patch, "no module per patch"
    assert [p for p in per_patch if p.parts[0] != "srt"] == []
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and any(p.glob("test_*.py"))}
    assert folders - packages == {"srt", "benchmark"}
