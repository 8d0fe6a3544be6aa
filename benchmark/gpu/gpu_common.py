"""What the GPU scripts share: the copy bandwidth, the environment line, per-tree workers, and
the GEMM studies' tree import and cold weights."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

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


def tree_batch_invariant_ops(tree: Path) -> ModuleType:
    """The tree's ``sglang.srt.batch_invariant_ops.batch_invariant_ops`` (bare sglang import)."""
    from gdn_parity.sandbox.bare_import import import_sglang_from

    import_sglang_from(tree)
    from sglang.srt.batch_invariant_ops import batch_invariant_ops

    return batch_invariant_ops


def dispatched_gemm(bio: ModuleType) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """``a @ w.T`` (``w`` an nn.Linear weight ``[N, K]``) as batch-invariant mode runs it on the
    Triton route (``_matmul_persistent_triton``: the tree's 0008 and 0011 where it has them)."""

    def run(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return bio._matmul_persistent_triton(a, w.t(), out_dtype=a.dtype)

    return run


def cold_weights(w: torch.Tensor) -> list[torch.Tensor]:
    """``w`` and copies of it, 2 to 200 and over 512 MiB in all where that takes at most 200:
    a timed graph calls the GEMM once per copy, so that no call finds its weight in L2."""
    copies = min(200, max(2, math.ceil((512 << 20) / w.nbytes)))
    return [w] + [w.clone() for _ in range(copies - 1)]
