"""The command line: one module per group of verbs; ``main`` maps errors to exit codes."""

from gdn_parity.cli.main import main

__all__ = ["main"]
