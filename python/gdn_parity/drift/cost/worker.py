"""Time the decode and verify steps of one variant, with that variant's sglang tree.

``python -m gdn_parity.drift.cost.worker JOB.json``: for each batch size, build
the server stack (one set of weights), prefill every request, time one decode
step and one verify step (``timing``), report ``progress 1`` per step and write
a ``VariantCost`` to ``job.out``.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass

from gdn_parity.drift.cost.results import VariantCost
from gdn_parity.drift.run.modes import Progress
from gdn_parity.drift.run.pool import serve


@dataclass(frozen=True)
class CostJob:
    variant: str
    tree: str
    exact_parity: bool
    deterministic: bool
    isolate: str | None
    size: str
    device: str
    prompt: list[int]
    batches: list[int]
    gammas: list[int]
    ssm_dtype: str = "bfloat16"
    kv_cache_dtype: str = "auto"  # sglang's --kv-cache-dtype
    kv_scale: float | None = None  # the attention layers' K/V scale (None: none)
    replays: int = 50
    graphs: bool = True
    round: int = 0  # which pass over the variants this is (cost --rounds)
    # cost --profile's job: each step's kernels (its times, eager, are not the table's)
    profile: bool = False
    out: str = ""

    @property
    def stack(self) -> str:
        return "server"  # cost times the server stack alone

    @property
    def progress_total(self) -> int:
        return (1 + len(self.gammas)) * len(self.batches)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> CostJob:
        return cls(**json.loads(text))


def run_cost_job(job: CostJob, progress: Progress) -> VariantCost:
    from gdn_parity.drift.cost.floor import copy_bandwidth
    from gdn_parity.drift.cost.timing import time_step
    from gdn_parity.drift.model.config import SIZES
    from gdn_parity.drift.model.stacks import StackSpec, build_stack
    from gdn_parity.drift.model.weights import make_weights
    from gdn_parity.drift.run import loops

    started = time.perf_counter()
    bandwidth = copy_bandwidth() if job.device == "cuda" else float("inf")
    weights = make_weights(SIZES[job.size], job.device)
    steps, live, tree = [], [], ""
    for requests in job.batches:
        model = build_stack(
            StackSpec(
                stack="server",
                size=job.size,
                device=job.device,
                max_len=len(job.prompt) + max(job.gammas) + 2,
                ssm_dtype=job.ssm_dtype,
                kv_cache_dtype=job.kv_cache_dtype,
                kv_scale=job.kv_scale,
                deterministic=job.deterministic,
                exact_parity=job.exact_parity,
                isolate=job.isolate,
                requests=requests,
            ),
            weights=weights,
        )
        loops.prefill(model, job.prompt)
        for phase, width in [("decode", 1)] + [("verify", g + 1) for g in job.gammas]:
            steps.append(
                time_step(
                    model, phase, width, job.replays, job.graphs, bandwidth, profile=job.profile
                )
            )
            progress(1)
        live, tree = model.live_sources(), model.kernels.tree
        del model
    return VariantCost(
        variant=job.variant,
        sglang_tree=tree,
        device=job.device,
        size=job.size,
        ssm_dtype=job.ssm_dtype,
        kv_cache_dtype=job.kv_cache_dtype,
        kv_scale=job.kv_scale,
        live_sources=live,
        steps=steps,
        seconds=time.perf_counter() - started,
        bandwidth=bandwidth,
        round=job.round,
    )


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1:], CostJob.from_json, run_cost_job))
