"""Run every mode of the demo for one numerics variant, with that variant's sglang tree.

``python -m gdn_parity.drift.run.worker JOB.json`` imports sglang from the job's
tree (skipping ``sglang/__init__``), runs Base decode and every speculative
mode from one shared prefill, writes the results to ``job.out`` and reports
progress on stdout as ``progress N`` lines (N newly committed tokens).
``run_job`` does the same in-process, with the sglang that is importable.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from gdn_parity.drift.run.modes import Mode, Progress
from gdn_parity.drift.run.pool import serve
from gdn_parity.drift.run.results import Decoded, ModeResult, VariantResult

if TYPE_CHECKING:
    from gdn_parity.drift.attribute.tracker import Attributor
    from gdn_parity.drift.model.hybrid import HybridModel
    from gdn_parity.drift.model.server.model import ServerModel
    from gdn_parity.drift.run.loops import BaseTrajectory


@dataclass(frozen=True)
class Job:
    variant: str
    tree: str
    exact_parity: bool
    size: str
    device: str
    prompt: list[int]
    tokens: int
    modes: list[Mode]
    ssm_dtype: str = "bfloat16"
    dtype: str = "bfloat16"  # activations and weights (sglang's --dtype)
    attention: str = "torch"
    stack: str = "rowwise"  # or "server" (drift.model.stacks)
    deterministic: bool = False
    isolate: str | None = None  # the server stack's one live source (variants.Variant)
    requests: int = 5  # the server stack's batch
    kv_cache_dtype: str = "auto"  # the server stack's KV pool (sglang's --kv-cache-dtype)
    kv_scale: float | None = None  # a checkpoint's per-tensor K/V scale (None: none)
    attribute: bool = False  # record and compare every component (drift.attribute)
    stop_at_divergence: bool = False  # end a mode at its first token off Base's
    seed: int = 0
    trace_dir: str | None = None
    out: str = ""

    @property
    def progress_total(self) -> int:
        return self.tokens * (1 + len(self.modes))

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Job:
        raw = json.loads(text)
        raw["modes"] = [Mode.from_dict(m) for m in raw["modes"]]
        return cls(**raw)


@dataclass
class _Tracer:
    """Opens one sglang GDNStateTrace per run, named after the mode."""

    job: Job
    model: HybridModel
    paths: dict[str, str] = field(default_factory=dict)

    def start(self, label: str, draft_tokens: int) -> None:
        if self.job.trace_dir is None:
            return
        slug = label.replace(" ", "_").replace("=", "")
        path = os.path.join(self.job.trace_dir, self.job.variant, f"{slug}.jsonl")
        flags = {
            "variant": self.job.variant,
            "mode": label,
            "gdn_verify_exact_parity": self.job.exact_parity,
            "attention": self.job.attention,
            "stack": self.job.stack,
            "enable_deterministic_inference": self.job.deterministic,
            "isolate": self.job.isolate,
            "requests": self.job.requests,
            "kv_cache_dtype": self.job.kv_cache_dtype,
            "kv_scale": self.job.kv_scale,
            "speculative_num_draft_tokens": draft_tokens,
        }
        self.model.start_trace(path, f"{self.job.size}, seed {self.job.seed}", flags)
        self.paths[label] = path

    def stop(self) -> None:
        self.model.stop_trace()


def run_job(job: Job, progress: Progress) -> VariantResult:
    from gdn_parity.debug.tokens import ids_sha256
    from gdn_parity.drift.attribute.tracker import Attributor
    from gdn_parity.drift.model.stacks import StackSpec, build_stack
    from gdn_parity.drift.run import loops

    started = time.perf_counter()
    model = build_stack(
        StackSpec(
            stack=job.stack,
            size=job.size,
            device=job.device,
            max_len=len(job.prompt) + job.tokens + max([m.gamma for m in job.modes] + [0]) + 1,
            ssm_dtype=job.ssm_dtype,
            dtype=job.dtype,
            attention=job.attention,
            deterministic=job.deterministic,
            exact_parity=job.exact_parity,
            isolate=job.isolate,
            requests=job.requests,
            kv_cache_dtype=job.kv_cache_dtype,
            kv_scale=job.kv_scale,
        ),
        rid="demo",
    )
    kernels = model.kernels
    if job.exact_parity and not kernels.has_exact_parity:
        raise RuntimeError(f"{kernels.tree} has no --gdn-verify-exact-parity kernel")
    tracer = _Tracer(job, model)
    attributor = Attributor(model, len(job.prompt)) if job.attribute else None
    with attributor or contextlib.nullcontext():
        start, first = loops.prefill(model, job.prompt)
        tracer.start("base", 1)
        base = loops.run_base(
            model,
            start,
            first,
            len(job.prompt),
            job.tokens,
            progress,
            job.exact_parity,
            observer=attributor,
        )
        tracer.stop()
        runs = [
            _run_mode(job, model, tracer, attributor, base, start, first, index, progress)
            for index in range(len(job.modes))
        ]
    return VariantResult(
        variant=job.variant,
        exact_parity=job.exact_parity,
        sglang_tree=kernels.tree,
        sglang_version=kernels.version,
        device=job.device,
        size=job.size,
        ssm_dtype=job.ssm_dtype,
        attention=job.attention,
        gdn_layers=model.c.gdn_layers,
        prompt_len=len(job.prompt),
        base=Decoded(base.tokens, ids_sha256(base.tokens)),
        modes=runs,
        traces=tracer.paths,
        seconds=time.perf_counter() - started,
        stack=job.stack,
        deterministic=job.deterministic,
        requests=job.requests if job.stack == "server" else 1,
        live_sources=model.live_sources(),
        kv_cache_dtype=job.kv_cache_dtype,
        kv_scale=job.kv_scale,
    )


def _run_mode(
    job: Job,
    model: HybridModel | ServerModel,
    tracer: _Tracer,
    attributor: Attributor | None,
    base: BaseTrajectory,
    start: Any,
    first: int,
    index: int,
    progress: Progress,
) -> ModeResult:
    """Mode ``index`` of the job from the shared prefill ``start``, against ``base``."""
    from gdn_parity.debug.tokens import ids_sha256
    from gdn_parity.drift.run import loops

    mode = job.modes[index]
    model.set_draft_tokens(mode.gamma + 1)
    tracer.start(mode.label, mode.gamma + 1)
    drafter = loops.OracleDrafter(base.tokens, mode.accept_rate, model.c.vocab, job.seed + index)
    if attributor is not None:
        attributor.start_mode(base.tokens)
    run = loops.run_spec(
        model,
        start,
        first,
        len(job.prompt),
        mode,
        job.tokens,
        job.exact_parity,
        drafter,
        progress,
        reference=base,
        observer=attributor,
        stop_at_divergence=job.stop_at_divergence,
    )
    tracer.stop()
    return ModeResult(
        label=mode.label,
        mode=mode,
        tokens=run.tokens,
        sha256=ids_sha256(run.tokens),
        rounds=run.rounds,
        proposed=run.proposed,
        accepted=run.accepted,
        histogram=run.histogram,
        diffs=run.diffs,
        attribution=attributor.result() if attributor is not None else None,
    )


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1:], Job.from_json, run_job))
