"""server-cost's arithmetic: time per output token and per step from a short and a long run,
against values worked out by hand."""

from __future__ import annotations

import pytest

from gdn_parity.errors import GdnParityError
from gdn_parity.servercost.results import Repeat, RequestTiming, RunTiming, Spread
from gdn_parity.servercost.timing import repeat_cost, spread


def _run(tokens: int, requests: list[tuple[float, int, int | None]]) -> RunTiming:
    return RunTiming(tokens, [RequestTiming(e2e, ct, verify, 0) for e2e, ct, verify in requests])


def test_base_one_token_is_one_step():
    # 13 then 253 tokens: 240 more tokens in 2.4 s more -> 10 ms a token, 10 ms a step.
    repeat = Repeat(_run(13, [(1.0, 13, None)]), _run(253, [(3.4, 253, None)]))
    cost = repeat_cost(repeat)
    assert cost.tpot_s == pytest.approx(0.010)
    assert cost.step_s == pytest.approx(0.010)
    assert cost.tokens_per_step == pytest.approx(1.0)


def test_dspark_steps_are_verifies():
    # Accept length 3: 4 verifies for the short run's 12 decoded tokens, 84 for the long's
    # 252. 2.4 s for 240 tokens in 80 verifies: 10 ms a token, 30 ms a verify, 3 a verify.
    repeat = Repeat(_run(13, [(1.0, 13, 4)]), _run(253, [(3.4, 253, 84)]))
    cost = repeat_cost(repeat)
    assert cost.tpot_s == pytest.approx(0.010)
    assert cost.step_s == pytest.approx(0.030)
    assert cost.tokens_per_step == pytest.approx(3.0)


def test_the_prefill_and_the_wait_cancel_per_request():
    # Three requests that waited 0.1, 0.5 and 0.9 s for prefills in both runs: the same
    # 8 ms a token each, though their e2e latencies differ.
    short = _run(5, [(0.1 + 0.032, 5, None), (0.5 + 0.032, 5, None), (0.9 + 0.032, 5, None)])
    long = _run(45, [(0.1 + 0.352, 45, None), (0.5 + 0.352, 45, None), (0.9 + 0.352, 45, None)])
    assert repeat_cost(Repeat(short, long)).tpot_s == pytest.approx(0.008)


def test_a_repeat_is_the_median_over_its_requests():
    # 100 more tokens in 1.0, 1.1 and 5.0 s more: 10, 11 and 50 ms a token; the median is 11.
    short = _run(10, [(1.0, 10, None), (1.0, 10, None), (1.0, 10, None)])
    long = _run(110, [(2.0, 110, None), (2.1, 110, None), (6.0, 110, None)])
    cost = repeat_cost(Repeat(short, long))
    assert cost.tpot_s == pytest.approx(0.011)
    assert cost.step_s == pytest.approx(0.011)


def test_the_spread_is_the_median_lowest_and_highest():
    assert spread([12.0, 10.0, 11.5]) == Spread(11.5, 10.0, 12.0)
    assert spread([3.0, 1.0, 2.0, 10.0]) == Spread(2.5, 1.0, 10.0)
    assert spread([7.0]) == Spread(7.0, 7.0, 7.0)


@pytest.mark.parametrize(
    ("long", "fragment"),
    [
        ((0.9, 253, None), "-0.1000 s"),  # faster than the short run
        ((3.4, 13, None), "+0 tokens"),  # no more tokens
        ((3.4, 253, 4), "+0 steps"),  # no more verifies
    ],
)
def test_a_long_run_that_is_not_longer_is_an_error(long, fragment):
    short = (1.0, 13, 4 if long[2] is not None else None)
    with pytest.raises(GdnParityError, match="request 0: the long run is not longer") as caught:
        repeat_cost(Repeat(_run(13, [short]), _run(253, [long])))
    assert fragment in str(caught.value)
