"""``gdn-parity demo``: Base vs DSpark-style forced reject and natural acceptance, per variant.

Each variant runs in a worker process of its own (its sglang tree is the
package ``sglang``); the workers run in parallel and report progress, this
process draws one progress bar and then writes the table, the raw results and
the figure.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from gdn_parity.drift.attribute.report import LEGEND as ATTRIBUTION_LEGEND
from gdn_parity.drift.attribute.report import attribution_rows, attribution_table
from gdn_parity.drift.model.server.padding import padded_batch
from gdn_parity.drift.model.stacks import describe_kv_cache, kv_cache_problem
from gdn_parity.drift.report import LEGEND, Row, markdown_table, rows, verdict
from gdn_parity.drift.run.modes import Mode
from gdn_parity.drift.run.pool import Bar, run_workers
from gdn_parity.drift.run.results import VariantResult, results_json
from gdn_parity.drift.run.variants import Variant, variant_tree
from gdn_parity.drift.run.worker import Job
from gdn_parity.errors import GdnParityError
from gdn_parity.notes import note
from gdn_parity.queue.series import Series


@dataclass(frozen=True)
class DemoPlan:
    variants: list[Variant]
    size: str
    device: str
    prompt: list[int]
    tokens: int
    modes: list[Mode]
    ssm_dtype: str
    attention: str
    stack: str
    seed: int
    out_dir: Path
    trace_dir: Path | None
    jobs: int
    batch: int = 1  # requests per batch (the server stack's; the row-wise stack serves one)
    attribute: bool = False  # record and compare every component (drift.attribute)
    stop_at_divergence: bool = False
    dtype: str = "bfloat16"  # activations and weights (sglang's --dtype)
    # The server stack's KV pool, the same for every variant: sglang's --kv-cache-dtype
    # ("auto": the model's dtype), and the attention layers' K/V scale (None: none).
    kv_cache_dtype: str = "auto"
    kv_scale: float | None = None

    def __post_init__(self) -> None:
        """A plan the stack cannot run is refused when it is made, before any work."""
        rowwise_deterministic = [v.name for v in self.variants if v.deterministic]
        if self.stack == "rowwise" and rowwise_deterministic:
            raise GdnParityError(
                f"variants {rowwise_deterministic} enable deterministic inference, which only "
                "the server stack runs: pass --stack server"
            )
        problem = kv_cache_problem(self.stack, self.kv_cache_dtype, self.kv_scale)
        if problem is not None:
            raise GdnParityError(problem)


def demo_jobs(series: Series, plan: DemoPlan, raw_dir: Path) -> list[Job]:
    """One worker job per variant of the plan (materialises the variants' trees)."""
    return [
        Job(
            variant=v.name,
            tree=str(variant_tree(series, v)),
            exact_parity=v.exact_parity,
            size=plan.size,
            device=plan.device,
            prompt=plan.prompt,
            tokens=plan.tokens,
            modes=plan.modes,
            ssm_dtype=plan.ssm_dtype,
            dtype=plan.dtype,
            attention=plan.attention,
            stack=plan.stack,
            deterministic=v.deterministic,
            isolate=v.isolate,
            requests=plan.batch,
            kv_cache_dtype=plan.kv_cache_dtype,
            kv_scale=plan.kv_scale,
            attribute=plan.attribute,
            stop_at_divergence=plan.stop_at_divergence,
            seed=plan.seed,
            trace_dir=str(plan.trace_dir) if plan.trace_dir else None,
            out=str(raw_dir / f"{v.name}.json"),
        )
        for v in plan.variants
    ]


def _run_variants(series: Series, plan: DemoPlan, raw_dir: Path) -> list[VariantResult]:
    jobs = demo_jobs(series, plan, raw_dir)
    note(
        f"starting {len(jobs)} worker(s), {min(plan.jobs, len(jobs))} at a time: each imports "
        "sglang's kernels and builds the model before its first token"
    )
    bar = Bar("demo", "tok", sum(j.progress_total for j in jobs))
    try:
        return run_workers(
            "gdn_parity.drift.run.worker", jobs, plan.jobs, plan.device, bar, VariantResult
        )
    finally:
        bar.close()


# What each stack can show, and the variant whose run shows it: on the row-wise stack (a
# control: everything but the GDN layers one row at a time) that the flag makes the GDN
# layers exact; on the server stack that deterministic inference with the flag makes
# speculative decoding token-identical to Base.
CONTRACT_VARIANT = {"rowwise": "exact-parity", "server": "deterministic-exact-parity"}
# Each stack's claim, and what it rests on: the closing line gives the claim, its verdict,
# then this, so that the verdict is read first.
CONTRACT_CLAIM = {
    "rowwise": "exact parity of the GDN layers",
    "server": "token identity with Base",
}
CONTRACT_BASIS = {
    "rowwise": "exact-parity; the row-wise stack computes everything else one row at a time, "
    "a control that says nothing about GEMMs, attention kernels or batching",
    "server": "deterministic-exact-parity: --enable-deterministic-inference and "
    "--gdn-verify-exact-parity, on the server stack: batched GEMMs, sglang's Triton attention "
    "and GDN backends, decode's fused conv",
}


def run_demo(series: Series, plan: DemoPlan) -> tuple[str, bool | None]:
    """Run the plan; return the report and whether the stack's contract held in every mode
    (``CONTRACT_VARIANT``). None when the plan does not run that variant.
    """
    with tempfile.TemporaryDirectory() as raw_dir:
        results = _run_variants(series, plan, Path(raw_dir))
    plan.out_dir.mkdir(parents=True, exist_ok=True)  # only now: an interrupted demo leaves none
    table = rows(results)
    contract = CONTRACT_VARIANT[plan.stack]
    parity = [r for r in table if r.variant == contract and r.label != "base"]
    holds = all(r.bitwise for r in parity) if parity else None
    attribution = (
        "## Attribution\n\n"
        + attribution_table(attribution_rows(results))
        + "\n"
        + ATTRIBUTION_LEGEND
        if plan.attribute
        else None
    )
    report = _report(plan, results, markdown_table(table), verdict(table), parity, attribution)
    (plan.out_dir / "demo.md").write_text(report)
    (plan.out_dir / "demo.json").write_text(results_json(results))
    from gdn_parity.drift.plot import write_figure

    write_figure(results, plan.out_dir / "drift.png")
    return report, holds


def _scope(plan: DemoPlan) -> str:
    """What the run covers, from its settings: the report's title, and its closing line's end."""
    device = "CPU under the Triton interpreter" if plan.device == "cpu" else "CUDA"
    if plan.stack == "server":
        stack = (
            f"server stack (batch of {plan.batch}, padded to "
            f"{padded_batch(plan.batch, 'decode')} in decode and "
            f"{padded_batch(plan.batch, 'verify')} in verify; sglang's Triton attention backend)"
        )
    else:
        stack = f"row-wise stack, {plan.attention} attention"
    stopped = (
        ", each mode stopped at its first token that diverges from Base's"
        if plan.stop_at_divergence
        else ""
    )
    kv = describe_kv_cache(plan.dtype, plan.kv_cache_dtype, plan.kv_scale)
    return (
        f"{plan.size} model on {device}, {plan.tokens} tokens, {plan.dtype} activations, "
        f"{kv}, {plan.ssm_dtype} SSM pool, {stack}{stopped}"
    )


def _closing_line(plan: DemoPlan, parity: list[Row]) -> str:
    """The stack's claim, whether it held in the modes of the contract's variant, and what
    the run covered: one line that says it all when it is quoted alone."""
    broken = sum(1 for r in parity if not r.bitwise)
    outcome = (
        f"BROKEN in {broken} of {len(parity)} modes"
        if broken
        else "HOLDS, tokens and committed states are bitwise equal to Base in all "
        f"{len(parity)} modes"
    )
    return (
        f"{CONTRACT_CLAIM[plan.stack]}: {outcome} ({CONTRACT_BASIS[plan.stack]}), for the "
        f"{_scope(plan)}"
    )


def _report(
    plan: DemoPlan,
    results: list[VariantResult],
    table: str,
    summary: str,
    parity: list[Row],
    attribution: str | None,
) -> str:
    """The report (with its Attribution section where recorded), closed by the contract's
    line: whether it held, or that this run did not judge it."""
    bases = {r.variant: r.base.sha256 for r in results}
    lines = [
        f"# gdn-parity demo: {_scope(plan)}",
        "",
        f"Verdict: {summary}",
        "",
        "Each mode is compared with its own variant's Base greedy decode. Variants: "
        + "; ".join(f"{v.name} = {v.description}" for v in plan.variants)
        + ".",
        "",
        table,
        LEGEND,
        "Base decode is the same in every variant: "
        + ("yes" if len(set(bases.values())) == 1 else f"NO ({bases})"),
    ]
    if plan.stack == "rowwise" and plan.attention != "torch":
        lines.append(
            f"(attention is {plan.attention}: decode and verify run different attention "
            "kernels, so exact GDN parity alone need not make the model lossless)"
        )
    if attribution is not None:
        lines += ["", attribution.rstrip("\n"), ""]
    lines.append(_closing_line(plan, parity) if parity else _not_judged_line(plan))
    return "\n".join(lines) + "\n"


def _not_judged_line(plan: DemoPlan) -> str:
    """The closing line of a run without the contract's variant: nothing was claimed."""
    variant = CONTRACT_VARIANT[plan.stack]
    return (
        f"{CONTRACT_CLAIM[plan.stack]}: NOT JUDGED, this run has no {variant} variant (add it "
        f"to --variants) ({CONTRACT_BASIS[plan.stack]}), for the {_scope(plan)}"
    )
