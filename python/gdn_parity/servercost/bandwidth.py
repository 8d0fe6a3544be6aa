"""Measure the copy bandwidth before a server starts, in the servers' Python and environment.

The probe (``copyprobe``) runs with the server's interpreter and environment, so it sees the
GPU and the torch the server will, while no server of the run holds the GPU; this package's
directory goes last on its PYTHONPATH, so it imports wherever the runner imports it from.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import gdn_parity
from gdn_parity.errors import GdnParityError
from gdn_parity.servercost.results import Bandwidth

PROBE = "gdn_parity.servercost.copyprobe"
PROBE_TIMEOUT_S = 300.0  # torch's import and CUDA's start take most of it
PACKAGE_ROOT = Path(gdn_parity.__file__).resolve().parents[1]


def probe_argv(python: str) -> list[str]:
    return [python, "-m", PROBE]


def probe_env(server_env: Mapping[str, str]) -> dict[str, str]:
    """A server's environment (what the runner sets over its own), with this package last on
    PYTHONPATH."""
    paths = [p for p in server_env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**server_env, "PYTHONPATH": os.pathsep.join([*paths, str(PACKAGE_ROOT)])}


def _parse(stdout: str) -> Bandwidth:
    lines = stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1])
        bytes_per_s, device = answer["bytes_per_s"], answer["device"]
        software = answer.get("software")
    except (IndexError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise GdnParityError(f"{PROBE} printed no bandwidth ({stdout.strip()[-200:]!r})") from exc
    if (
        isinstance(bytes_per_s, bool)
        or not isinstance(bytes_per_s, int | float)
        or not math.isfinite(bytes_per_s)
        or bytes_per_s <= 0
        or not isinstance(device, str)
        or not isinstance(software, str | None)
    ):
        raise GdnParityError(f"{PROBE} printed no usable bandwidth ({lines[-1]!r})")
    return Bandwidth(float(bytes_per_s), device, software)


def measure_bandwidth(
    python: str, server_env: Mapping[str, str], cwd: Path, environ: Mapping[str, str]
) -> Bandwidth:
    """The probe's bandwidth; an error naming what went wrong (its last line of stderr)."""
    try:
        proc = subprocess.run(
            probe_argv(python),
            env={**environ, **probe_env(server_env)},
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise GdnParityError(f"{PROBE} did not finish within {PROBE_TIMEOUT_S:g} s") from None
    except OSError as exc:
        raise GdnParityError(f"{python} -m {PROBE} did not start: {exc}") from exc
    if proc.returncode != 0:
        said = proc.stderr.strip().splitlines()[-1:] or ["nothing on stderr"]
        raise GdnParityError(f"{PROBE} exited with status {proc.returncode}: {said[0]}")
    return _parse(proc.stdout)
