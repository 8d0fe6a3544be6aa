"""The README opens with the two commands for a fresh machine, and CI runs the second."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _commands() -> list[str]:
    lines = (ROOT / "README.md").read_text().splitlines()
    first_section = lines[: next(i for i, line in enumerate(lines) if line.startswith("## "))]
    return [line.strip() for line in first_section if line.startswith("    ")]


def test_the_readme_opens_with_a_demo_command_and_a_test_command():
    demo, tests = _commands()
    assert demo.startswith("python3 -m venv .venv") and demo.endswith("gdn-parity demo")
    assert tests.startswith("python3 -m venv .venv") and tests.endswith("-m pytest")


def test_ci_runs_the_readme_test_command():
    assert _commands()[1] in (ROOT / ".ci" / "run").read_text().splitlines()
