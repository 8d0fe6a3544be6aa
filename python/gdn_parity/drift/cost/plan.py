"""``gdn-parity cost``: time one decode and one verify step per variant, one worker at a time.

Each variant runs in a worker process of its own (its sglang tree is the package
``sglang``). The workers run one after another: timings of two processes sharing
a GPU would measure each other. With ``rounds`` > 1 the variants run that many times,
in turn and in alternating order (A, B, then B, A, ...), so that neither always runs first:
a drift of the GPU's clocks over the run shows as a spread of the ratio, not as a bias.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from gdn_parity.drift.cost.fit import PREFILL_CHUNK, Unfit
from gdn_parity.drift.cost.report import (
    cost_table,
    eager_steps,
    kernel_tables,
    legend,
    not_run,
    profile_gaps,
)
from gdn_parity.drift.cost.results import VariantCost
from gdn_parity.drift.cost.worker import CostJob
from gdn_parity.drift.model.stacks import describe_kv_cache
from gdn_parity.drift.run.pool import Bar, run_workers
from gdn_parity.drift.run.variants import Variant, variant_tree
from gdn_parity.errors import GdnParityError
from gdn_parity.notes import note
from gdn_parity.queue.series import Series

WORKER = "gdn_parity.drift.cost.worker"


@dataclass(frozen=True)
class CostPlan:
    variants: list[Variant]
    size: str
    device: str
    prompt: list[int]
    ssm_dtype: str
    batches: list[int]
    gammas: list[int]
    replays: int
    graphs: bool
    out_dir: Path
    kv_cache_dtype: str = "auto"  # sglang's --kv-cache-dtype, the same for every variant
    kv_scale: float | None = None
    rounds: int = 1  # passes over the variants, in turn
    profile: bool = False  # then each variant's kernels, in jobs of their own (profile_jobs)
    # cost --context: tokens prefilled per request, seeded ids; None: the reporter's prompt
    contexts: list[int] | None = None
    skipped: list[Unfit] = field(default_factory=list)  # pairs that do not fit the GPU (fit)
    prefill_chunk: int = PREFILL_CHUNK

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise ValueError(f"rounds must be at least 1, not {self.rounds}")
        if self.profile and not self.graphs:
            # the profile runs in capture mode, as a replay does; eager steps run outside it
            raise ValueError("profile needs graphs: the profile is of what a replay runs")
        if not self.runs:
            raise ValueError("every (context, batch) pair is skipped: nothing to time")

    @property
    def context_list(self) -> list[int]:
        """The contexts of the table: ``contexts``, else the reporter's prompt's length."""
        return self.contexts or [len(self.prompt)]

    @property
    def runs(self) -> list[tuple[int, int]]:
        """The (context, batch) pairs a worker times, in order: every pair but the skipped."""
        skipped = {(u.context, u.batch) for u in self.skipped}
        pairs = [(c, n) for c in self.context_list for n in self.batches]
        return [pair for pair in pairs if pair not in skipped]


def _job(series: Series, plan: CostPlan, v: Variant, r: int, out: Path) -> CostJob:
    return CostJob(
        variant=v.name,
        tree=str(variant_tree(series, v)),
        exact_parity=v.exact_parity,
        deterministic=v.deterministic,
        isolate=v.isolate,
        size=plan.size,
        device=plan.device,
        prompt=plan.prompt,
        runs=plan.runs,
        gammas=plan.gammas,
        seeded=plan.contexts is not None,
        prefill_chunk=plan.prefill_chunk,
        ssm_dtype=plan.ssm_dtype,
        kv_cache_dtype=plan.kv_cache_dtype,
        kv_scale=plan.kv_scale,
        replays=plan.replays,
        graphs=plan.graphs,
        round=r,
        out=str(out),
    )


def cost_jobs(series: Series, plan: CostPlan, raw_dir: Path) -> list[CostJob]:
    """The timed jobs: every variant once per round, in alternating order."""
    return [
        _job(series, plan, v, r, raw_dir / f"{v.name}.{r}.json")
        for r in range(plan.rounds)
        for v in (plan.variants if r % 2 == 0 else plan.variants[::-1])
    ]


def profile_jobs(series: Series, plan: CostPlan, raw_dir: Path) -> list[CostJob]:
    """With ``plan.profile``, one job per variant after the timed ones, in a process of its own:
    each step's kernels, eager and in capture mode (``timing.time_step``). CUPTI then never runs
    in a process whose replays are timed, nor before a capture."""
    if not plan.profile:
        return []
    return [
        dataclasses.replace(
            _job(series, plan, v, 0, raw_dir / f"{v.name}.profile.json"),
            profile=True,
            graphs=False,
            replays=1,
        )
        for v in plan.variants
    ]


def _run(jobs: list[CostJob], device: str, label: str) -> list[VariantCost]:
    """``jobs`` one at a time, in their order (the rounds alternate it), behind one bar."""
    bar = Bar(label, "step", sum(j.progress_total for j in jobs))
    try:
        return [run_workers(WORKER, [job], 1, device, bar, VariantCost)[0] for job in jobs]
    finally:
        bar.close()


def run_cost(series: Series, plan: CostPlan) -> str:
    """Run the plan; write ``cost.md`` and ``cost.json`` under ``plan.out_dir``; with
    ``plan.profile``, then profile each variant and, where that works, add its section to
    ``cost.md`` and write ``profile.json`` (a profile that fails leaves the timed table, with a
    line saying so). The report."""
    with tempfile.TemporaryDirectory() as raw_dir:
        passes = f" in turn, {plan.rounds} times" if plan.rounds > 1 else ""
        note(f"timing {len(plan.variants)} variant(s), one at a time{passes}")
        results = _run(cost_jobs(series, plan, Path(raw_dir)), plan.device, "cost")
        eager = eager_steps(results)
        if eager is not None:
            note(f"warning: {eager}")
        plan.out_dir.mkdir(parents=True, exist_ok=True)
        (plan.out_dir / "cost.json").write_text(
            json.dumps([r.to_dict() for r in results], indent=1)
        )
        report = _report(plan, results, "")
        (plan.out_dir / "cost.md").write_text(report)
        if not plan.profile:
            return report
        (plan.out_dir / "profile.json").unlink(missing_ok=True)  # no earlier run's
        note(f"profiling {len(plan.variants)} variant(s), one at a time")
        try:
            profiles = _run(profile_jobs(series, plan, Path(raw_dir)), plan.device, "profile")
        except GdnParityError as exc:
            note(f"warning: the profile failed; cost.md has the timed table only: {exc}")
            section = f"The profile (`--profile`) failed: {str(exc).splitlines()[0]}\n"
        else:
            empty = profile_gaps(profiles)
            if empty is not None:
                note(f"warning: {empty}")
            section = kernel_tables(results, profiles, plan.runs, plan.gammas) or ""
            (plan.out_dir / "profile.json").write_text(
                json.dumps([p.to_dict() for p in profiles], indent=1)
            )
    report = _report(plan, results, section)
    (plan.out_dir / "cost.md").write_text(report)
    return report


def _report(plan: CostPlan, results: list[VariantCost], section: str) -> str:
    kv = describe_kv_cache("bfloat16", plan.kv_cache_dtype, plan.kv_scale)
    bandwidths = [r.bandwidth for r in results]
    return "\n".join(
        (
            f"# gdn-parity cost: {plan.size} model on {plan.device}, {plan.ssm_dtype} SSM pool, "
            f"{kv}, server stack, gammas {','.join(map(str, plan.gammas))}",
            "",
            *not_run(plan.skipped),
            cost_table(results, plan.batches, plan.gammas, plan.context_list, plan.skipped),
            legend(
                plan.variants[0].name,
                plan.replays,
                bandwidths,
                plan.rounds,
                seeded=plan.contexts is not None,
                prefill_chunk=plan.prefill_chunk,
            ),
            section,
        )
    )
