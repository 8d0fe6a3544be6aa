"""Time one decode or verify forward of the server stack's padded batch.

The step's batch and the backends' metadata are built once (``prepare_step``);
the forward then runs a few times to warm up and, on CUDA, is captured as a
CUDA graph and replayed, as sglang's graph runner replays decode and target
verify; warm-up and capture run in sglang's capture mode, as the runner's do.
Each replay is timed with CUDA events (on CPU, the wall clock: it only checks
the plumbing, the interpreter's times mean nothing). A capture that fails falls
back to timing the eager forward, and the result says why. The model's state is
restored afterwards.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable

import torch

from gdn_parity.drift.cost.floor import step_bytes
from gdn_parity.drift.cost.results import CAPTURE_FAILED, StepTime
from gdn_parity.drift.model.server.model import ServerModel

WARMUP = 3


def _capture(run: Callable[[], torch.Tensor]) -> tuple[Callable[[], object], str]:
    """``run`` as a CUDA graph's replay, or ``run`` itself and why not."""
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
    except Exception as exc:  # any capture failure: time the eager forward instead
        torch.cuda.synchronize()
        return run, f"{CAPTURE_FAILED} ({type(exc).__name__}: {str(exc)[:160]})"
    return graph.replay, ""


def _elapsed_ms(run: Callable[[], object], cuda: bool) -> float:
    if not cuda:
        start = time.perf_counter()
        run()
        return (time.perf_counter() - start) * 1e3
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    run()
    end.record()
    end.synchronize()
    return begin.elapsed_time(end)


def _p90(samples: list[float]) -> float:
    """The 90th percentile; a single replay is its own."""
    if len(samples) < 2:
        return samples[0]
    return statistics.quantiles(samples, n=10, method="inclusive")[-1]


def time_step(
    model: ServerModel,
    phase: str,
    width: int,
    replays: int,
    graphs: bool,
    bandwidth: float,
    warmup: int = WARMUP,
) -> StepTime:
    """The median time of one ``phase`` forward of ``width`` rows per request, and its floor:
    the bytes it must move (``floor.step_bytes``) over ``bandwidth`` (bytes/s)."""
    cuda = model.device == "cuda"
    moved = step_bytes(
        model.c,
        model.w.embed.element_size(),
        model.ssm_dtype.itemsize,
        model.conv_dtype.itemsize,
        model.kv_dtype.itemsize,  # the KV pool's: 1 for FP8
        [r.length for r in model.requests],
        width,
    )
    model.set_draft_tokens(width if phase == "verify" else 1)
    snap = model.snapshot()  # after the resize, in host memory (ServerModel.snapshot)
    step = model.prepare_step(phase, width)
    graph = cuda and graphs
    # sglang's graph runner warms up and captures in its capture mode
    with model.capture_mode() if graph else contextlib.nullcontext():
        for _ in range(warmup):
            step.run()
        if graph:
            run, note = _capture(step.run)
        else:
            run = step.run
            note = "eager: --no-graphs" if cuda else "eager: CUDA graphs need --device cuda"
    samples = [_elapsed_ms(run, cuda) for _ in range(replays)]
    model.restore(snap)
    return StepTime(
        phase=phase,
        requests=model.n,
        padded=model.padded[phase],
        width=width,
        median_ms=statistics.median(samples),
        min_ms=min(samples),
        p90_ms=_p90(samples),
        replays=replays,
        graph=run is not step.run,
        note=note,
        bytes=moved.total,
        floor_ms=moved.total / bandwidth * 1e3,
    )
