"""What the GPU scripts share: the copy bandwidth, the environment line, per-tree workers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

from gdn_parity.drift.cost.floor import copy_bandwidth  # noqa: F401  (the scripts' import)


def gpu_env(**extra: object) -> dict:
    """The GPU, torch and triton of this process, plus ``extra``."""
    import triton

    return {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        **extra,
    }


def run_worker(script: str, name: str, tree: Path) -> list[dict]:
    """``script --worker TREE`` in a fresh process (one sglang tree per process).

    The worker prints its rows as JSON on its last line of output.
    """
    proc = subprocess.run(
        [sys.executable, script, "--worker", str(tree)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def replay_samples(graph: torch.cuda.CUDAGraph, calls: int, replays: int) -> list[float]:
    """Microseconds per captured call, one sample per replay of ``graph``."""
    graph.replay()
    torch.cuda.synchronize()
    samples = []
    for _ in range(replays):
        start, end = torch.cuda.Event(True), torch.cuda.Event(True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / calls)
    return samples
