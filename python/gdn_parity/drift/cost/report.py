"""The cost table: per variant, batch size and step (decode, verify at each gamma), the
median time with its spread, the ratio to the first variant's, and the floor."""

from __future__ import annotations

from gdn_parity.drift.cost.results import CAPTURE_FAILED, StepTime, VariantCost

HEADERS = (
    "variant",
    "live sources",
    "N",
    "step",
    "padded",
    "ms (min-p90)",
    "ratio",
    "floor ms",
    "x floor",
    "timed",
)


def _step_name(step: StepTime) -> str:
    return "decode" if step.phase == "decode" else f"verify γ={step.width - 1}"


def _timed(step: StepTime) -> str:
    return "CUDA graph" if step.graph else step.note


def cost_table(results: list[VariantCost], batches: list[int], gammas: list[int]) -> str:
    reference = results[0]
    shapes = [("decode", 1)] + [("verify", g + 1) for g in gammas]
    body = []
    for result in results:
        for n in batches:
            for phase, width in shapes:
                step = result.step(phase, n, width)
                ref = reference.step(phase, n, width)
                body.append(
                    [
                        result.variant,
                        ", ".join(result.live_sources) or "none",
                        str(n),
                        _step_name(step),
                        str(step.padded),
                        f"{step.median_ms:.3f} ({step.min_ms:.3f}-{step.p90_ms:.3f})",
                        f"{step.median_ms / ref.median_ms:.2f}x",
                        f"{step.floor_ms:.3f}",
                        f"{step.median_ms / step.floor_ms:.2f}x",
                        _timed(step),
                    ]
                )
    widths = [max(len(h), *(len(c[i]) for c in body)) for i, h in enumerate(HEADERS)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [line(list(HEADERS)), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    return "\n".join(out + [line(c) for c in body]) + "\n"


def eager_steps(results: list[VariantCost]) -> str | None:
    """A line naming the steps timed eagerly because their capture failed (their eager time
    sits beside graph replays in the table), or None."""
    failed = [
        f"{r.variant} N={s.requests} {_step_name(s)}"
        for r in results
        for s in r.steps
        if not s.graph and s.note.startswith(CAPTURE_FAILED)
    ]
    if not failed:
        return None
    return (
        f"{len(failed)} step(s) timed eagerly because their CUDA-graph capture failed (the "
        f"'timed' column says why): {', '.join(failed)}"
    )


def legend(reference: str, replays: int, bandwidth: float) -> str:
    return "\n".join(
        (
            f"- **ms**: the median of {replays} replays of one forward of the whole padded "
            "batch (verify γ=g: g + 1 rows per request), after warm-up; timed with CUDA "
            "events; in brackets the fastest replay and the 90th percentile.",
            f"- **ratio**: to {reference}'s same step at the same N.",
            "- **floor**: the bytes the step must move (every weight once, the embedding's "
            "gathered rows aside; each request's KV cache once; its GDN state read once and "
            "written once per token of the step) over the device-to-device copy bandwidth "
            f"measured in the same run ({bandwidth / 1e12:.2f} TB/s, reads and writes counted).",
            "- **timed**: a CUDA graph of the forward, as sglang's graph runner replays it, or "
            "the eager forward and why.",
            "- The forward is the server stack's (`docs/drift-stacks.md`): batch and metadata "
            "construction are outside the timed region, as in a graph replay.",
            "",
        )
    )
