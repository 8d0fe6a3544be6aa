"""Time the decode and verify steps of one variant, with that variant's sglang tree.

``python -m gdn_parity.drift.cost.worker JOB.json``: for each (context, batch
size), build the server stack (one set of weights), prefill every request
(``prefilled``), time one decode step and one verify step per gamma (``timing``),
report ``progress 1`` per step and write a ``VariantCost`` to ``job.out``.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from gdn_parity.drift.cost.fit import PREFILL_CHUNK, kv_slots
from gdn_parity.drift.cost.results import VariantCost
from gdn_parity.drift.run.modes import Progress
from gdn_parity.drift.run.pool import serve

if TYPE_CHECKING:
    import torch

    from gdn_parity.drift.model.server.model import ServerModel
    from gdn_parity.drift.model.weights import ModelWeights


@dataclass(frozen=True)
class CostJob:
    variant: str
    tree: str
    exact_parity: bool
    deterministic: bool
    isolate: str | None
    size: str
    device: str
    prompt: list[int]  # request 0's (without seeded: companion_prompts gives the others')
    runs: list[tuple[int, int]]  # (context, batch size), in the order they run
    gammas: list[int]
    # cost --context: every request prefills ``context`` seeded ids (prompts.context_prompts);
    # else the reporter's prompt and its companions, ``context`` being its length
    seeded: bool = False
    prefill_chunk: int = PREFILL_CHUNK  # tokens per prefill forward
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
        return (1 + len(self.gammas)) * len(self.runs)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> CostJob:
        raw = json.loads(text)
        return cls(**dict(raw, runs=[tuple(run) for run in raw["runs"]]))


def prefilled(
    job: CostJob, context: int, requests: int, weights: ModelWeights
) -> tuple[ServerModel, torch.Tensor]:
    """The job's server stack for ``requests`` requests, each prefilled with its prompt of
    ``context`` tokens in chunks of ``job.prefill_chunk``, with KV slots for the widest
    verify after it (``fit.kv_slots``); and each request's last logits of the prefill."""
    from gdn_parity.drift.cost.prompts import context_prompts
    from gdn_parity.drift.model.server.model import companion_prompts
    from gdn_parity.drift.model.stacks import StackSpec, build_stack

    if job.seeded:
        prompts = context_prompts(job.prompt, context, requests)
    elif context == len(job.prompt):
        prompts = companion_prompts(job.prompt, requests)
    else:
        raise ValueError(f"the reporter's prompt is {len(job.prompt)} tokens, not {context}")
    model = build_stack(
        StackSpec(
            stack="server",
            size=job.size,
            device=job.device,
            max_len=kv_slots(context, job.gammas),
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
    return model, model.prefill_prompts(prompts, job.prefill_chunk)


def run_cost_job(job: CostJob, progress: Progress) -> VariantCost:
    from gdn_parity.drift.cost.floor import copy_bandwidth
    from gdn_parity.drift.cost.timing import time_step
    from gdn_parity.drift.model.config import SIZES
    from gdn_parity.drift.model.weights import make_weights

    started = time.perf_counter()
    bandwidth = copy_bandwidth() if job.device == "cuda" else float("inf")
    weights = make_weights(SIZES[job.size], job.device)
    steps, live, tree = [], [], ""
    for context, requests in job.runs:
        model, _ = prefilled(job, context, requests, weights)
        for phase, width in [("decode", 1)] + [("verify", g + 1) for g in job.gammas]:
            step = time_step(
                model, phase, width, job.replays, job.graphs, bandwidth, profile=job.profile
            )
            steps.append(dataclasses.replace(step, context=context))
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
