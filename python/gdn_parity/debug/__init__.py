"""Debugging drift against real servers: the /generate client, the #35150 repro, trace diffs.

Nothing here imports torch or ``gdn_parity.drift``: these tools run next to any server.
"""
