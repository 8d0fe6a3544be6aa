"""Time one decode or verify forward of the server stack's padded batch.

The step's batch and the backends' metadata are built once (``prepare_step``);
the forward then runs a few times to warm up and, on CUDA, is captured as a
CUDA graph and replayed, as sglang's graph runner replays decode and target
verify; warm-up and capture run in sglang's capture mode, as the runner's do.
Each replay is timed with CUDA events (on CPU, the wall clock: it only checks
the plumbing, the interpreter's times mean nothing). A capture that fails falls
back to timing the eager forward, and the result says why. The model's state is
restored afterwards.

With ``profile`` (``cost --profile``), the eager forward also runs a few times under
torch's profiler, after the warm-up and in the same mode: each kernel's device time and
launches per forward (``kernel_times``), to say where a step's time goes. The captured
graph replays the kernels of that forward; the profile is not part of the timed replays.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable

import torch

from gdn_parity.drift.cost.floor import step_bytes
from gdn_parity.drift.cost.results import CAPTURE_FAILED, PROFILED, KernelTime, StepTime
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


def kernel_times(run: Callable[[], object], cuda: bool, calls: int = PROFILED) -> list[KernelTime]:
    """Each kernel ``run`` launches, with its launches and its device time per call of ``run``,
    longest first, from ``calls`` calls under torch's profiler. On CPU: each op's own CPU time
    (only the plumbing is checked there)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    # on CUDA the host's ops are recorded too (the kernels hang off them) and left out below
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    device = DeviceType.CUDA if cuda else DeviceType.CPU
    with profile(activities=activities) as prof:
        for _ in range(calls):
            run()
        if cuda:
            torch.cuda.synchronize()
    kernels = [
        KernelTime(
            name=e.key,
            calls=e.count / calls,
            ms=(e.self_device_time_total if cuda else e.self_cpu_time_total) / calls / 1e3,
        )
        for e in prof.key_averages()
        if e.device_type == device
    ]
    return sorted(kernels, key=lambda k: k.ms, reverse=True)


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
    profile: bool = False,
) -> StepTime:
    """The median time of one ``phase`` forward of ``width`` rows per request, and its floor:
    the bytes it must move (``floor.step_bytes``) over ``bandwidth`` (bytes/s); with
    ``profile``, its kernels (``kernel_times``)."""
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
        kernels = kernel_times(step.run, cuda) if profile else []
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
        kernels=kernels,
    )
