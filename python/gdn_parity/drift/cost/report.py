"""The cost table: per variant and batch size, the median decode and verify step, and the ratio
to the first variant's."""

from __future__ import annotations

from gdn_parity.drift.cost.results import StepTime, VariantCost

HEADERS = (
    "variant",
    "live sources",
    "N",
    "padded (decode/verify)",
    "decode ms (min-p90)",
    "verify ms (min-p90)",
    "decode ratio",
    "verify ratio",
    "timed",
)


def _timed(steps: list[StepTime]) -> str:
    notes = sorted({s.note for s in steps if not s.graph})
    return "CUDA graph" if not notes else "; ".join(notes)


def _spread(step: StepTime) -> str:
    return f"{step.median_ms:.3f} ({step.min_ms:.3f}-{step.p90_ms:.3f})"


def cost_table(results: list[VariantCost], batches: list[int]) -> str:
    reference = results[0]
    body = []
    for result in results:
        for n in batches:
            decode, verify = result.step("decode", n), result.step("verify", n)
            ref_decode, ref_verify = reference.step("decode", n), reference.step("verify", n)
            body.append(
                [
                    result.variant,
                    ", ".join(result.live_sources) or "none",
                    str(n),
                    f"{decode.padded}/{verify.padded}",
                    _spread(decode),
                    _spread(verify),
                    f"{decode.median_ms / ref_decode.median_ms:.2f}x",
                    f"{verify.median_ms / ref_verify.median_ms:.2f}x",
                    _timed([decode, verify]),
                ]
            )
    widths = [max(len(h), *(len(c[i]) for c in body)) for i, h in enumerate(HEADERS)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [line(list(HEADERS)), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    return "\n".join(out + [line(c) for c in body]) + "\n"


def legend(reference: str, gamma: int, replays: int) -> str:
    return "\n".join(
        (
            f"- **decode ms / verify ms**: the median of {replays} replays of one forward of "
            f"the whole padded batch (verify: gamma = {gamma}, {gamma + 1} rows per request), "
            "after warm-up; timed with CUDA events; in brackets the fastest replay and the "
            "90th percentile.",
            f"- **ratio**: to {reference}'s step at the same N.",
            "- **timed**: a CUDA graph of the forward, as sglang's graph runner replays it, or "
            "the eager forward and why.",
            "- The forward is the server stack's (`docs/drift-stacks.md`): batch and metadata "
            "construction are outside the timed region, as in a graph replay.",
            "",
        )
    )
