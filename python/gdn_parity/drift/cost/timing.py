"""Time one decode or verify forward of the server stack's padded batch.

The step's batch and the backends' metadata are built once (``prepare_step``);
the forward then runs a few times to warm up and, on CUDA, is captured as a
CUDA graph and replayed, as sglang's graph runner replays decode and target
verify; warm-up and capture run in sglang's capture mode, as the runner's do.
Each replay is timed with CUDA events (on CPU, the wall clock: it only checks
the plumbing, the interpreter's times mean nothing). A capture that fails falls
back to timing the eager forward, and the result says why. The model's state is
restored afterwards.

With ``profile`` (``cost --profile``'s jobs, which time nothing of record: CUPTI is never
loaded in a process whose replays are timed), the eager forward also runs a few times under
torch's profiler, after the warm-up and in the same mode: each kernel's device time and
launches per forward (``kernel_times``), to say where a step's time goes. A captured graph
replays the kernels of that forward.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterable

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


def per_call(averages: Iterable, calls: int, cuda: bool) -> list[KernelTime]:
    """``prof.key_averages()`` as ``KernelTime``s per call of the profiled function, longest
    first: on CUDA the device's kernels, copies and fills (the host's ops, whose kernels are
    their children, and ``record_function`` ranges on the device are left out, as torch's own
    totals leave them); on CPU the ops' own CPU time."""
    from torch.autograd import DeviceType

    device = DeviceType.CUDA if cuda else DeviceType.CPU
    kernels = [
        KernelTime(
            name=e.key,
            calls=e.count / calls,
            ms=(e.self_device_time_total if cuda else e.self_cpu_time_total) / calls / 1e3,
        )
        for e in averages
        if e.device_type == device and not e.is_user_annotation
    ]
    return sorted(kernels, key=lambda k: k.ms, reverse=True)


def kernel_times(run: Callable[[], object], cuda: bool, calls: int = PROFILED) -> list[KernelTime]:
    """Each kernel ``run`` launches, with its launches and its device time per call of ``run``,
    from ``calls`` calls under torch's profiler (``per_call``). On CPU: each op's own CPU time
    (only the plumbing is checked there)."""
    from torch.profiler import ProfilerActivity, profile

    # on CUDA the host's ops are recorded too (the kernels hang off them) and left out
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    with profile(activities=activities) as prof:
        for _ in range(calls):
            run()
        if cuda:
            torch.cuda.synchronize()
    return per_call(prof.key_averages(), calls, cuda)


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
    ``profile``, its kernels (``kernel_times``), from the eager forward in capture mode (a
    profiling job passes ``graphs=False``: no capture after CUPTI in its process)."""
    cuda = model.device == "cuda"
    if profile and graphs and cuda:  # CUPTI before a capture: later profiles come back empty
        raise ValueError("profile a step in a job that captures no graph (plan.profile_jobs)")
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
    # sglang's graph runner warms up and captures in its capture mode; a profile (which
    # captures nothing) runs there too, so that it sees the kernels a replay would run
    replayed = cuda and (graphs or profile)  # a profile job's graphs=False (plan.profile_jobs)
    with model.capture_mode() if replayed else contextlib.nullcontext():
        for _ in range(warmup):
            step.run()
        kernels = kernel_times(step.run, cuda) if profile else []
        if graph:
            run, note = _capture(step.run)
        else:
            run = step.run
            if profile:
                note = "profiled: this eager time is not the table's"
            else:
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
