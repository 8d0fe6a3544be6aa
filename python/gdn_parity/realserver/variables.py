"""``${NAME}`` in a plan's strings: a value from the command line (``--set NAME=VALUE``),
else from the environment. A name set nowhere is an error, never an empty string."""

from __future__ import annotations

import re
from collections.abc import Mapping

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
