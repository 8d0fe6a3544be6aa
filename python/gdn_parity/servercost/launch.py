"""The command line and environment of a cost start: server-parity's
(``gdn_parity.realserver.launch``), named by the start's label, with the simulated accept
length in the environment and the plan's dtypes as flags.

A DSpark start gets ``SGLANG_SIMULATE_ACC_LEN=<k>`` and
``SGLANG_SIMULATE_ACC_TOKEN_MODE=real-draft-token``: every verify commits exactly k tokens,
the first k - 1 drafts and the target's token after them. Every start gets
``--mamba-ssm-dtype`` and ``--kv-cache-dtype`` after the plan's args, the widths the floor
counts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from gdn_parity.realserver.launch import Launch, launch_for
from gdn_parity.servercost.plan import CostPlan
from gdn_parity.servercost.schedule import CostStart

TOKEN_MODE = "real-draft-token"


def simulate_env(accept_length: int) -> dict[str, str]:
    return {
        "SGLANG_SIMULATE_ACC_LEN": str(accept_length),
        "SGLANG_SIMULATE_ACC_TOKEN_MODE": TOKEN_MODE,
    }


def start_launch(
    plan: CostPlan,
    python: str,
    start: CostStart,
    out: Path,
    port: int | None,
    environ: Mapping[str, str],
) -> Launch:
    server = plan.servers[start.server]
    env = dict(server.env)
    if start.accept_length is not None:
        env |= simulate_env(start.accept_length)
    server = dataclasses.replace(server, name=start.label, env=env)
    launch = launch_for(plan, python, server, 1, out, port, environ)
    dtypes = ("--mamba-ssm-dtype", plan.ssm_dtype, "--kv-cache-dtype", plan.kv_cache_dtype)
    return dataclasses.replace(launch, argv=(*launch.argv, *dtypes))
