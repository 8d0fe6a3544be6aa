"""``${NAME}`` in a plan's strings: a value from the command line (``--set NAME=VALUE``),
else from the environment. A name set nowhere is an error, never an empty string."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gdn_parity.errors import GdnParityError

REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)


def parse_assignment(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` (``--set``): the name and its value; ValueError when it is not one."""
    match = ASSIGNMENT.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not NAME=VALUE (NAME: letters, digits and _)")
    return match.group(1), match.group(2)


def expand(text: str, where: str, given: Mapping[str, str], environ: Mapping[str, str]) -> str:
    """``text`` with every ``${NAME}`` replaced; ``where`` names the plan's key in an error."""

    def value(match: re.Match) -> str:
        name = match.group(1)
        if name in given:
            return given[name]
        if name in environ:
            return environ[name]
        raise GdnParityError(
            f"{where}: ${{{name}}} is not set (pass --set {name}=... or export {name})"
        )

    return REFERENCE.sub(value, text)


def unset_names(data: Any, given: Mapping[str, str], environ: Mapping[str, str]) -> list[str]:
    """Every ``${NAME}`` in the strings of ``data`` (a parsed plan) that is set nowhere, in
    order of first use: a plan with several unset names is refused naming all of them."""
    names: list[str] = []

    def visit(value: Any) -> None:
        if isinstance(value, str):
            names.extend(REFERENCE.findall(value))
        elif isinstance(value, dict):
            for item in value.values():
                visit(item)
        elif isinstance(value, list):
            for item in value:
                visit(item)

    visit(data)
    return [n for n in dict.fromkeys(names) if n not in given and n not in environ]
