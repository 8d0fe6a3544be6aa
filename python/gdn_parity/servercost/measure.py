"""Time one batch size on a server that is up: a warm-up run, then ``repeats`` pairs of a
short and a long run of the same prompts.

Every run flushes the server's radix cache first (a prompt found cached would skip its
prefill, and the difference of two runs would hold it), letting sglang wait for the last
run's requests to leave its scheduler, then sends every request at once,
one thread and connection each (``gdn_parity.realserver.compare.send_concurrently``),
greedy and ``ignore_eos``. The pairs alternate their order (short first, then long first),
so that neither always runs on a GPU the other warmed. The prompts are
``prompt_len`` seeded ids each, the same in every run.
"""

from __future__ import annotations

from gdn_parity.debug.sglang_client import Generation, flush_cache, greedy_payload
from gdn_parity.errors import GdnParityError
from gdn_parity.realserver.compare import send_concurrently
from gdn_parity.realserver.prompts import seeded_prompts
from gdn_parity.servercost.plan import BenchmarkSpec
from gdn_parity.servercost.results import Repeat, RequestTiming, RunTiming

FLUSH_WAIT_S = 30.0  # for the scheduler to drop the requests just answered


def _count(meta: dict, key: str, rid: str) -> int:
    value = meta.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise GdnParityError(f"request {rid}'s meta_info has no integer {key} (got {value!r})")
    return value


def request_timing(answer: Generation, rid: str, speculative: bool) -> RequestTiming:
    """What one request's ``meta_info`` says of its time, tokens and steps."""
    meta = answer.meta_info
    e2e = meta.get("e2e_latency")
    if isinstance(e2e, bool) or not isinstance(e2e, int | float):
        raise GdnParityError(f"request {rid}'s meta_info has no e2e_latency (got {e2e!r})")
    retractions = meta.get("num_retractions", 0)
    return RequestTiming(
        e2e_s=float(e2e),
        completion_tokens=_count(meta, "completion_tokens", rid),
        verify_ct=_count(meta, "spec_verify_ct", rid) if speculative else None,
        retractions=retractions if isinstance(retractions, int) else 0,
    )


def run_once(
    url: str,
    prompts: list[list[int]],
    new_tokens: int,
    rid: str,
    speculative: bool,
    timeout: float,
) -> RunTiming:
    """Flush, then send every prompt at once asking for ``new_tokens``; request i's rid is
    ``<rid>-<i>``."""
    flush_cache(url, timeout, FLUSH_WAIT_S)
    rids = [f"{rid}-{i}" for i in range(len(prompts))]
    payloads = [greedy_payload(p, new_tokens, r) for p, r in zip(prompts, rids, strict=True)]
    answers = send_concurrently(url, payloads, timeout)
    timings = [request_timing(a, r, speculative) for a, r in zip(answers, rids, strict=True)]
    return RunTiming(new_tokens, timings)


def time_batch(
    url: str, bench: BenchmarkSpec, batch: int, speculative: bool, timeout: float
) -> list[Repeat]:
    """The warm-up (not kept) and the repeats of ``batch`` on the server at ``url``."""
    prompts = seeded_prompts(batch, bench.prompt_len, bench.prompt_seed, bench.prompt_vocab)
    rid = f"{bench.name}-b{batch}"
    run_once(url, prompts, bench.short_tokens, f"{rid}-warmup", speculative, timeout)
    repeats = []
    for r in range(bench.repeats):
        lengths = {"short": bench.short_tokens, "long": bench.long_tokens}
        order = ("short", "long") if r % 2 == 0 else ("long", "short")
        runs = {
            kind: run_once(url, prompts, lengths[kind], f"{rid}-r{r}-{kind}", speculative, timeout)
            for kind in order
        }
        repeats.append(Repeat(short=runs["short"], long=runs["long"]))
    return repeats
