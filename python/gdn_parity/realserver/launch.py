"""The exact ``python -m sglang.launch_server`` command line and environment of a server start.

The runner passes, in this order: the model (``--model-path``, ``--load-format``), the
request format (``--skip-tokenizer-init``: requests carry ``input_ids``), the address
(``--host 127.0.0.1 --port P``), ``--random-seed 0``, ``--mem-fraction-static``,
``--disable-cuda-graph`` where graphs are off, DSpark's flags (``--speculative-algorithm
DSPARK``, the draft, ``--speculative-dspark-block-size`` gamma, the draft's weights as
``dummy``), then the plan's common args and the server's own. The environment is the
runner's, with the plan's common env and the server's over it, ``<tree>/python`` first on
PYTHONPATH (before the plan's PYTHONPATH, else the runner's), and ``SGLANG_GDN_STATE_TRACE``
where the server traces.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gdn_parity.realserver.plan import TRACE_ENV, ServerPlan, ServerSpec

HOST = "127.0.0.1"
RANDOM_SEED = 0
ANY_PORT = "<free port>"  # a dry run's port: the real one is picked at start


@dataclass(frozen=True)
class Launch:
    server: ServerSpec
    instance: int  # the server's first start is 1
    argv: tuple[str, ...]
    env: Mapping[str, str]  # what the runner sets over its own environment
    cwd: Path
    log: Path
    trace_dir: Path | None
    port: int | None  # None in a dry run

    @property
    def label(self) -> str:
        """The server's name, with ``-2``, ``-3``, ... from its second start on."""
        return start_label(self.server.name, self.instance)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"


def start_label(name: str, instance: int) -> str:
    return name if instance == 1 else f"{name}-{instance}"


def server_argv(python: str, plan: ServerPlan, server: ServerSpec, port: str) -> list[str]:
    argv = [
        python, "-m", "sglang.launch_server",
        "--model-path", str(server.model),
        "--load-format", server.load_format,
        "--skip-tokenizer-init",
        "--host", HOST,
        "--port", port,
        "--random-seed", str(RANDOM_SEED),
        "--mem-fraction-static", f"{server.mem_fraction:g}",
    ]  # fmt: skip
    if not server.cuda_graphs:
        argv.append("--disable-cuda-graph")
    if server.mode == "dspark":
        argv += [
            "--speculative-algorithm", "DSPARK",
            "--speculative-draft-model-path", str(server.draft),
            "--speculative-dspark-block-size", str(server.gamma),
            "--speculative-draft-load-format", "dummy",
        ]  # fmt: skip
    return argv + [*plan.common_args, *server.args]


def server_env(
    plan: ServerPlan, server: ServerSpec, trace_dir: Path | None, environ: Mapping[str, str]
) -> dict[str, str]:
    env = {**plan.common_env, **server.env}
    after = env.get("PYTHONPATH", environ.get("PYTHONPATH", ""))
    env["PYTHONPATH"] = os.pathsep.join([str(server.tree / "python"), *([after] if after else [])])
    if trace_dir is not None:
        env[TRACE_ENV] = str(trace_dir)
    return env


def launch_for(
    plan: ServerPlan,
    python: str,
    server: ServerSpec,
    instance: int,
    out: Path,
    port: int | None,
    environ: Mapping[str, str],
) -> Launch:
    label = start_label(server.name, instance)
    trace_dir = out / f"{label}-trace" if server.trace else None
    return Launch(
        server=server,
        instance=instance,
        argv=tuple(server_argv(python, plan, server, ANY_PORT if port is None else str(port))),
        env=server_env(plan, server, trace_dir, environ),
        cwd=out,
        log=out / "logs" / f"{label}.log",
        trace_dir=trace_dir,
        port=port,
    )
