"""The cost table: per context, batch size, variant and step (decode, verify at each
gamma), the median time with its spread, the ratio to the first variant's, and the floor;
a row for each (context, batch) that did not fit the GPU; with ``--profile``, each step's
kernels side by side."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from gdn_parity.debug.issue35150 import INPUT_IDS
from gdn_parity.drift.cost.fit import Unfit
from gdn_parity.drift.cost.results import (
    CAPTURE_FAILED,
    PROFILED,
    KernelTime,
    StepTime,
    VariantCost,
)

NOT_RUN = "**not run**"  # the variant cell of a (context, batch) that did not fit

HEADERS = (
    "variant",
    "live sources",
    "context",
    "N",
    "step",
    "padded",
    "ms (min-p90)",
    "ratio",
    "floor ms",
    "x floor",
    "timed",
)


ROUNDS_HEADERS = (
    *HEADERS[:6],
    "ms, median of rounds (lowest-highest)",
    "ratio, median of rounds (lowest-highest)",
    *HEADERS[8:],
)


def _step_name(step: StepTime) -> str:
    return "decode" if step.phase == "decode" else f"verify γ={step.width - 1}"


def _timed(step: StepTime) -> str:
    return "CUDA graph" if step.graph else step.note


def _one_round(step: StepTime, ref: StepTime) -> list[str]:
    return [
        f"{step.median_ms:.3f} ({step.min_ms:.3f}-{step.p90_ms:.3f})",
        f"{step.median_ms / ref.median_ms:.2f}x",
        f"{step.floor_ms:.3f}",
        f"{step.median_ms / step.floor_ms:.2f}x",
    ]


def _rounds(steps: list[StepTime], refs: list[StepTime]) -> list[str]:
    """The median over rounds of each round's median, and of the ratio within a round, each
    with the rounds' lowest and highest."""
    medians = [s.median_ms for s in steps]
    ratios = [s.median_ms / r.median_ms for s, r in zip(steps, refs, strict=True)]
    ms, floor = statistics.median(medians), statistics.median(s.floor_ms for s in steps)
    return [
        f"{ms:.3f} ({min(medians):.3f}-{max(medians):.3f})",
        f"{statistics.median(ratios):.3f}x ({min(ratios):.3f}-{max(ratios):.3f})",
        f"{floor:.3f}",
        f"{ms / floor:.2f}x",
    ]


def _not_run_row(unfit: Unfit) -> list[str]:
    return [NOT_RUN, "-", str(unfit.context), str(unfit.batch), "all", "-", "did not fit"]


def cost_table(
    results: list[VariantCost],
    batches: list[int],
    gammas: list[int],
    contexts: Sequence[int] = (len(INPUT_IDS),),
    skipped: Sequence[Unfit] = (),
) -> str:
    """Per context and N, one row per variant and step; a (context, N) in ``skipped`` is one
    row, ``NOT_RUN``, that says what it needs. ``results`` hold every round
    (``VariantCost.round``): with one, a row is that run's median (min-p90) and its ratio to
    the first variant's; with more, the medians over rounds, a ratio taken within each round."""
    names = list(dict.fromkeys(r.variant for r in results))
    by_round = {(r.variant, r.round): r for r in results}
    rounds = sorted({r.round for r in results})
    shapes = [("decode", 1)] + [("verify", g + 1) for g in gammas]
    unfit = {(u.context, u.batch): u for u in skipped}
    body = []
    refs = [by_round[names[0], i] for i in rounds]
    for context in contexts:
        for n in batches:
            if (context, n) in unfit:
                u = unfit[context, n]
                body.append([*_not_run_row(u), "-", "-", "-", u.why()])
                continue
            for name in names:
                runs = [by_round[name, i] for i in rounds]
                for phase, width in shapes:
                    steps = [run.step(phase, n, width, context) for run in runs]
                    ref_steps = [ref.step(phase, n, width, context) for ref in refs]
                    if len(rounds) == 1:
                        cells = _one_round(steps[0], ref_steps[0])
                    else:
                        cells = _rounds(steps, ref_steps)
                    body.append(
                        [
                            name,
                            ", ".join(runs[0].live_sources) or "none",
                            str(context),
                            str(n),
                            _step_name(steps[0]),
                            str(steps[0].padded),
                            *cells,
                            "; ".join(dict.fromkeys(_timed(s) for s in steps)),
                        ]
                    )
    headers = HEADERS if len(rounds) == 1 else ROUNDS_HEADERS
    widths = [max(len(h), *(len(c[i]) for c in body)) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [line(list(headers)), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    return "\n".join(out + [line(c) for c in body]) + "\n"


def not_run(skipped: Sequence[Unfit]) -> list[str]:
    """The lines above the table that name the (context, N) pairs not run, or none."""
    if not skipped:
        return []
    pairs = ", ".join(f"context {u.context} at N = {u.batch}" for u in skipped)
    return [
        f"**Not run: {len(skipped)} (context, N) pair(s) did not fit the GPU** ({pairs}). "
        f"Their rows say **{NOT_RUN.strip('*')}** and what each needs.",
        "",
    ]


def eager_steps(results: list[VariantCost]) -> str | None:
    """A line naming the steps timed eagerly because their capture failed (their eager time
    sits beside graph replays in the table), or None."""
    rounds = len({r.round for r in results}) > 1
    failed = [
        f"{r.variant}{f' (round {r.round + 1})' if rounds else ''} context {s.context} "
        f"N={s.requests} {_step_name(s)}"
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


def legend(
    reference: str,
    replays: int,
    bandwidths: list[float],
    rounds: int = 1,
    seeded: bool = False,
    prefill_chunk: int | None = None,
) -> str:
    """What the table's columns mean; ``bandwidths``: each worker's measured copy bandwidth;
    ``seeded``: the contexts are ``--context``'s, prefilled in chunks of ``prefill_chunk``."""
    low, high = min(bandwidths) / 1e12, max(bandwidths) / 1e12
    if rounds == 1:
        ms = (
            f"- **ms**: the median of {replays} replays of one forward of the whole padded "
            "batch (verify γ=g: g + 1 rows per request), after warm-up; timed with CUDA "
            "events; in brackets the fastest replay and the 90th percentile."
        )
        ratio = f"- **ratio**: to {reference}'s same step at the same context and N."
        measured = f"measured in the same run ({low:.2f} TB/s, reads and writes counted)"
    else:
        ms = (
            f"- **ms**: the variants ran {rounds} times, in turn and in alternating order (the "
            "first variant first, then last, ...), each time in a fresh process; a round's "
            f"time is the median of {replays} replays of one forward of the whole padded batch "
            "(verify γ=g: g + 1 rows per request), after warm-up, timed with CUDA events. The "
            "cell is the median of the rounds' times, in brackets the lowest and the highest; "
            "a step timed eagerly in some rounds says so in **timed**."
        )
        ratio = (
            f"- **ratio**: to {reference}'s same step at the same context and N in the same "
            "round; the "
            "median over rounds, in brackets the lowest and the highest."
        )
        measured = (
            f"measured by each worker ({low:.2f}-{high:.2f} TB/s, reads and writes counted); "
            "the cell is the median over rounds, and **x floor** the median ms over it"
        )
    if seeded:
        context = (
            "- **context**: tokens prefilled per request before the step (`--context`): "
            f"seeded ids, request 0's first {len(INPUT_IDS)} the reporter's. Prefill runs "
            f"per request in chunks of at most {prefill_chunk} tokens, as sglang's chunked "
            "prefill."
        )
    else:
        context = (
            f"- **context**: request 0's {len(INPUT_IDS)} tokens are the reporter's prompt; "
            "the other requests' prompts are shorter (`--context` sets every request's)."
        )
    return "\n".join(
        (
            context,
            ms,
            ratio,
            "- **floor**: the bytes the step must move (every weight once, the embedding's "
            "gathered rows aside; each request's KV cache read once, its context and the "
            "step's rows, whatever γ; its GDN state read once and written once per token of "
            f"the step) over the device-to-device copy bandwidth {measured}.",
            "- **timed**: a CUDA graph of the forward, as sglang's graph runner replays it, or "
            "the eager forward and why.",
            "- The forward is the server stack's (`docs/drift-stacks.md`): batch and metadata "
            "construction are outside the timed region, as in a graph replay.",
            "",
        )
    )


KERNELS_SHOWN = 12  # per variant and step, in cost --profile's tables
NAME_HEAD, NAME_TAIL = 60, 24  # a longer kernel name is shown as its head … its tail


def short_name(name: str) -> str:
    """A kernel's name for a table: without ``void `` and its parameter list, and when still
    long, its head and its tail (the JSON keeps it whole)."""
    name = name.removeprefix("void ")
    depth = 0
    for i in range(len(name) - 1, -1, -1) if name.endswith(")") else ():
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0:  # the parameter list's "(", unless a space precedes it (Memcpy, Memset)
            if i > 0 and name[i - 1] != " ":
                name = name[:i]
            break
    if len(name) > NAME_HEAD + NAME_TAIL + 1:
        name = f"{name[:NAME_HEAD]}…{name[-NAME_TAIL:]}"
    return name.replace("|", "\\|")


def _kernel_cell(kernels: dict[str, KernelTime], name: str) -> str:
    k = kernels.get(name)
    return "-" if k is None else f"{k.ms:.3f} ({k.calls:g})"


def kernel_tables(
    results: list[VariantCost],
    profiles: list[VariantCost],
    runs: list[tuple[int, int]],
    gammas: list[int],
    shown: int = KERNELS_SHOWN,
) -> str | None:
    """``cost --profile``'s section: per (context, N) of ``runs`` and step, the kernels of
    each variant's profile side by side (ms per forward, launches), the ``shown`` longest of
    each, then the rest, all of them, and the step's timed median (the first round's, from
    ``results``). None without profiles; a step whose profile recorded no kernel says so."""
    if not profiles:
        return None
    first = min(r.round for r in results)
    timed = {r.variant: r for r in results if r.round == first}
    names = [p.variant for p in profiles]
    shapes = [("decode", 1)] + [("verify", g + 1) for g in gammas]
    out = [
        "## Where the time goes (`--profile`)",
        "",
        "Each kernel's device time per forward in ms, and its launches per forward in brackets "
        "(a fraction: the profiler lost some), from "
        f"{PROFILED} eager forwards in capture mode under torch's profiler, after the warm-up, "
        "in a process of each variant's own that captures no graph and whose times are not this "
        "table's (a graph replays these kernels). "
        f"The longest {shown} of each variant's kernels, then the rest summed. **all kernels** "
        "is their sum; kernels on sglang's alternate stream overlap others, so it is not the "
        "step's busy time. **step** is the timed median (the first round's). One kernel name "
        "can serve many layers (the mode's GEMMs are one Triton kernel); two names cut to the "
        "same text get [2], [3] (`profile.json` has them whole).",
    ]
    for context, n in runs:
        for phase, width in shapes:
            steps = [p.step(phase, n, width, context) for p in profiles]
            by_name = [{k.name: k for k in s.kernels} for s in steps]
            top = [k.name for s in steps for k in s.kernels[:shown]]
            rows = sorted(
                dict.fromkeys(top), key=lambda name: -max(k.get(name, _NONE).ms for k in by_name)
            )
            out += [
                "",
                f"context {context}, N = {n}, {_step_name(steps[0])}:",
                "",
                "| kernel | " + " | ".join(names) + " |",
                "|---|" + "---|" * len(names),
            ]
            shown_as: dict[str, int] = {}
            for name in rows:
                cells = [_kernel_cell(k, name) for k in by_name]
                label = short_name(name)
                shown_as[label] = shown_as.get(label, 0) + 1
                if shown_as[label] > 1:  # two kernels cut to one name: tell them apart
                    label += f" [{shown_as[label]}]"
                out.append(f"| `{label}` | " + " | ".join(cells) + " |")
            rest = [
                f"{sum(k.ms for k in s.kernels if k.name not in rows):.3f}" if s.kernels else "-"
                for s in steps
            ]
            total = [
                f"{sum(k.ms for k in s.kernels):.3f}" if s.kernels else "none recorded"
                for s in steps
            ]
            median = [f"{timed[v].step(phase, n, width, context).median_ms:.3f}" for v in names]
            out += [
                "| other kernels | " + " | ".join(rest) + " |",
                "| **all kernels** | " + " | ".join(total) + " |",
                "| **step** | " + " | ".join(median) + " |",
            ]
    return "\n".join(out) + "\n"


_NONE = KernelTime("", 0.0, 0.0)


def profile_gaps(profiles: list[VariantCost]) -> str | None:
    """A line naming the profiled steps that recorded no kernel, or None."""
    empty = [
        f"{p.variant} context {s.context} N={s.requests} {_step_name(s)}"
        for p in profiles
        for s in p.steps
        if not s.kernels
    ]
    if not empty:
        return None
    return f"{len(empty)} profiled step(s) recorded no kernel: {', '.join(empty)}"
