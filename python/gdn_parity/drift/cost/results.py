"""A cost worker's measurements: typed, and JSON on the way between processes."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from gdn_parity.debug.issue35150 import INPUT_IDS

CAPTURE_FAILED = "eager: the capture failed"  # a StepTime's note, then why
PROFILED = 3  # forwards run under the profiler for a step's KernelTimes (cost --profile)


@dataclass(frozen=True)
class KernelTime:
    """One kernel's share of a step (``cost --profile``), per forward of the padded batch."""

    name: str  # as the profiler names it
    calls: float  # launches per forward
    ms: float  # device time per forward (on CPU: the ops' own CPU time)


@dataclass(frozen=True)
class StepTime:
    """One forward of the padded batch, run again and again."""

    phase: str  # "decode" or "verify"
    requests: int
    padded: int  # the graph batch size it runs at
    width: int  # rows per request: 1 in decode, gamma + 1 in verify
    median_ms: float
    min_ms: float
    p90_ms: float
    replays: int
    graph: bool  # replayed as a CUDA graph (else eager)
    note: str  # why not a graph, when it is not
    bytes: int  # what the step must move (weights, GDN state, KV: cost.floor)
    floor_ms: float  # bytes over the copy bandwidth measured in the same process
    # cost --profile: the step's kernels, longest first (timing.kernel_times); else none
    kernels: list[KernelTime] = field(default_factory=list)
    # tokens prefilled per request (cost --context); without it, and in a cost.json from
    # before it, request 0's are the reporter's 24 (the others' fewer)
    context: int = len(INPUT_IDS)


@dataclass(frozen=True)
class VariantCost:
    variant: str
    sglang_tree: str
    device: str
    size: str
    ssm_dtype: str
    live_sources: list[str]
    steps: list[StepTime]
    seconds: float
    bandwidth: float  # the device-to-device copy bandwidth, bytes/s (cost.floor)
    kv_cache_dtype: str = "auto"  # sglang's --kv-cache-dtype
    kv_scale: float | None = None  # the attention layers' K/V scale (None: none)
    round: int = 0  # which pass over the variants (cost --rounds) timed it

    def step(
        self, phase: str, requests: int, width: int = 1, context: int = len(INPUT_IDS)
    ) -> StepTime:
        shape = (phase, requests, width, context)
        return next(s for s in self.steps if (s.phase, s.requests, s.width, s.context) == shape)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, text: str) -> VariantCost:
        raw = json.loads(text)
        steps = [
            StepTime(**dict(s, kernels=[KernelTime(**k) for k in s.get("kernels", [])]))
            for s in raw["steps"]
        ]
        return cls(**dict(raw, steps=steps))
