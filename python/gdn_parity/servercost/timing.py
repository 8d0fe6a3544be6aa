"""Time per output token and per step, from two runs of the same batch: a short and a long.

sglang 0.5.23 answers a non-streamed ``/generate`` with ``meta_info.e2e_latency`` (the
tokenizer manager's seconds from the request's receipt to its last token), always, and with
``spec_verify_ct`` on a speculative server; a first-token time only under
``--enable-metrics``. A request's e2e latency holds its prefill, its wait for the other
requests' prefills (the scheduler runs a waiting prefill before the next decode step) and
its decode steps. The same prompts, sent again after a cache flush, prefill the same way, so
the difference between a long and a short run is decode steps alone:

    TPOT = (e2e_long - e2e_short) / (completion_long - completion_short)
    step = (e2e_long - e2e_short) / (steps_long - steps_short)

where a step is a verify (``spec_verify_ct``) on DSpark and one token on Base. Each request
gives one value; a repeat's is the median over its requests (they decode in lockstep), and
the table's the median over repeats, with the lowest and the highest.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from gdn_parity.errors import GdnParityError
from gdn_parity.servercost.results import Repeat, RequestTiming, Spread


@dataclass(frozen=True)
class RepeatCost:
    tpot_s: float
    step_s: float
    tokens_per_step: float


def _steps(r: RequestTiming) -> int:
    return r.completion_tokens if r.verify_ct is None else r.verify_ct


def repeat_cost(repeat: Repeat) -> RepeatCost:
    """The repeat's time per output token and per step, and tokens per step: the medians over
    its requests of each one's long run less its short run. An error when a request's long
    run has no more tokens, steps or time than its short one."""
    tpots, steps, ratios = [], [], []
    pairs = zip(repeat.short.requests, repeat.long.requests, strict=True)
    for i, (short, long) in enumerate(pairs):
        seconds = long.e2e_s - short.e2e_s
        tokens = long.completion_tokens - short.completion_tokens
        count = _steps(long) - _steps(short)
        if min(seconds, tokens, count) <= 0:
            raise GdnParityError(
                f"request {i}: the long run is not longer than the short one ({seconds:+.4f} s, "
                f"{tokens:+d} tokens, {count:+d} steps)"
            )
        tpots.append(seconds / tokens)
        steps.append(seconds / count)
        ratios.append(tokens / count)
    return RepeatCost(statistics.median(tpots), statistics.median(steps), statistics.median(ratios))


def spread(values: Sequence[float]) -> Spread:
    return Spread(statistics.median(values), min(values), max(values))
