"""``gdn-parity demo``: Base vs DSpark-style forced reject and natural acceptance, three numerics.

Each variant runs in a worker process of its own (its sglang tree is the
package ``sglang``); the workers run in parallel and report progress, this
process draws one progress bar and then writes the table, the raw results and
the figure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from gdn_parity.drift.report import LEGEND, markdown_table, rows, verdict
from gdn_parity.drift.run.modes import Mode
from gdn_parity.drift.run.results import VariantResult
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


def _worker_env(device: str) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("SGLANG_CACHE_DIR", str(Path(tempfile.gettempdir()) / "gdn-parity-sglang"))
    env["PYTHONWARNINGS"] = "ignore"
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    return env


class _Bar:
    """One progress bar over every worker's committed tokens, drawn from the first token on."""

    def __init__(self, total: int):
        self.lock = threading.Lock()
        self.total = total
        self.bar = None

    def update(self, n: int) -> None:
        from tqdm import tqdm

        with self.lock:
            if self.bar is None:
                self.bar = tqdm(
                    total=self.total, unit="tok", desc="demo", file=sys.stderr, mininterval=1.0
                )
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _run_workers(jobs: list[Job], parallel: int, device: str, bar: _Bar) -> list[VariantResult]:
    results: dict[int, VariantResult] = {}
    errors: list[str] = []
    semaphore = threading.Semaphore(parallel)
    procs: list[subprocess.Popen] = []
    interrupted = threading.Event()

    def run(index: int, job: Job) -> None:
        with semaphore, tempfile.TemporaryDirectory() as tmp:
            if interrupted.is_set():
                return
            job_file = Path(tmp) / "job.json"
            job_file.write_text(job.to_json())
            log = Path(tmp) / "stderr.log"
            with log.open("w") as err:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "gdn_parity.drift.run.worker", str(job_file)],
                    stdout=subprocess.PIPE,
                    stderr=err,
                    text=True,
                    env=_worker_env(device),
                )
                procs.append(proc)
                if interrupted.is_set():  # started while the others were being stopped
                    proc.kill()
                for line in proc.stdout:
                    if line.startswith("progress "):
                        bar.update(int(line.split()[1]))
                proc.wait()
            if interrupted.is_set():
                return
            if proc.returncode != 0:
                errors.append(f"variant {job.variant} failed:\n{log.read_text()[-3000:]}")
            else:
                results[index] = VariantResult.from_json(Path(job.out).read_text())

    threads = [threading.Thread(target=run, args=(i, j)) for i, j in enumerate(jobs)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except BaseException:  # Ctrl-C: stop the workers, then let it propagate
        interrupted.set()
        for proc in procs:
            proc.kill()
        for t in threads:
            t.join()
        raise
    if errors:
        raise GdnParityError("\n".join(errors))
    return [results[i] for i in range(len(jobs))]


def _run_variants(series: Series, plan: DemoPlan, raw_dir: Path) -> list[VariantResult]:
    jobs = [
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
            attention=plan.attention,
            stack=plan.stack,
            deterministic=v.deterministic,
            seed=plan.seed,
            trace_dir=str(plan.trace_dir) if plan.trace_dir else None,
            out=str(raw_dir / f"{v.name}.json"),
        )
        for v in plan.variants
    ]
    note(
        f"starting {len(jobs)} worker(s), {min(plan.jobs, len(jobs))} at a time: each imports "
        "sglang's kernels and builds the model before its first token"
    )
    bar = _Bar(sum(j.progress_total for j in jobs))
    try:
        return _run_workers(jobs, plan.jobs, plan.device, bar)
    finally:
        bar.close()


def run_demo(series: Series, plan: DemoPlan) -> tuple[str, bool | None]:
    """Run the plan; return the report and whether exact parity held in every mode.

    None when the plan has no exact-parity variant.
    """
    rowwise_deterministic = [v.name for v in plan.variants if v.deterministic]
    if plan.stack == "rowwise" and rowwise_deterministic:
        raise GdnParityError(
            f"variants {rowwise_deterministic} enable deterministic inference, which only the "
            "server stack runs: pass --stack server"
        )
    with tempfile.TemporaryDirectory() as raw_dir:
        results = _run_variants(series, plan, Path(raw_dir))
    plan.out_dir.mkdir(parents=True, exist_ok=True)  # only now: an interrupted demo leaves none
    table = rows(results)
    parity = [r for r in table if r.variant == "exact-parity" and r.label != "base"]
    holds = all(r.bitwise for r in parity) if parity else None
    report = _report(plan, results, markdown_table(table), verdict(table), holds)
    (plan.out_dir / "demo.md").write_text(report)
    (plan.out_dir / "demo.json").write_text(json.dumps([r.to_dict() for r in results], indent=1))
    from gdn_parity.drift.plot import write_figure

    write_figure(results, plan.out_dir / "drift.png")
    return report, holds


def _report(
    plan: DemoPlan, results: list[VariantResult], table: str, summary: str, holds: bool | None
) -> str:
    bases = {r.variant: r.base.sha256 for r in results}
    lines = [
        f"# gdn-parity demo: {plan.size} model on {plan.device}, {plan.tokens} tokens, "
        f"{plan.ssm_dtype} SSM pool, "
        + (
            "server stack (batch of 5, sglang's Triton attention backend)"
            if plan.stack == "server"
            else f"row-wise stack, {plan.attention} attention"
        ),
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
    if holds is not None:
        compared = (
            "the server stack: batched GEMMs and sglang's attention and GDN backends"
            if plan.stack == "server"
            else "the GDN layers; the row-wise stack computes everything else one row at a "
            "time, a control that says nothing about GEMMs or batching"
        )
        lines.append(
            f"exact parity ({compared}): "
            + (
                "HOLDS, tokens and committed states are bitwise equal to Base in every mode"
                if holds
                else "BROKEN in at least one mode"
            )
        )
    if plan.stack == "rowwise" and plan.attention != "torch":
        lines.append(
            f"(attention is {plan.attention}: decode and verify run different attention "
            "kernels, so exact GDN parity alone need not make the model lossless)"
        )
    return "\n".join(lines) + "\n"
