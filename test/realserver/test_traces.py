"""Where both servers trace (SGLANG_GDN_STATE_TRACE), each rid's GDN states are compared with
gdn_parity.debug.trace_diff after its batch: equal states are counted, and the first that
differs is named even when the tokens agree."""

from __future__ import annotations

TOKENS = 12
# The fake traces two layers. Per request, its speculative trace holds a verify_input at
# each of the TOKENS positions (each with a Base decode_input there) and a post_commit one
# position on (each with one but the last): 2 * (TOKENS + TOKENS - 1) compared states.
PER_REQUEST = 2 * (2 * TOKENS - 1)


def _plan(rig, spec_env: dict):
    servers = {
        "base": rig.server(name="base", trace=True, cuda_graphs=False),
        "spec": rig.server("dspark", 1, name="spec", trace=True, cuda_graphs=False, env=spec_env),
    }
    comparison = {"base": "base", "spec": "spec", "batches": [1, 2], "max_new_tokens": TOKENS,
                  "expect": "identical"}  # fmt: skip
    return rig.plan(servers, {"c": comparison})


def test_equal_traces_are_counted_per_request(rig):
    proc = rig.run(_plan(rig, {}))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    start = rig.events("start")[0]
    assert start["env"]["SGLANG_GDN_STATE_TRACE"] == str(rig.out / "base-trace")
    batch1, batch2 = rig.results()["comparisons"][0]["batches"]
    assert batch1["states"] == f"bitwise equal at {PER_REQUEST} compared states"
    assert batch2["states"] == f"bitwise equal at {2 * PER_REQUEST} compared states"
    assert [r["trace"]["compared"] for r in batch2["requests"]] == [PER_REQUEST] * 2


def test_a_state_that_differs_is_found_though_the_tokens_agree(rig):
    # Request 1's prompt is 24 ids: its states from position 27 on differ.
    proc = rig.run(_plan(rig, {"FAKE_SGLANG_STATE_DIVERGE": "c-b2-1@27"}))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    batch1, batch2 = rig.results()["comparisons"][0]["batches"]
    assert batch1["met"] is True
    assert (batch2["identical"], batch2["observed"], batch2["met"]) == (2, "diverge", False)
    untouched, touched = batch2["requests"]
    assert untouched["trace"]["first"] is None
    # At position 27, the commit's state (post_commit) comes before the next input's; layer 0
    # before layer 1.
    first = {"pos": 27, "layer": 0, "checkpoint": "post_commit", "step": None}
    assert touched["trace"]["first"] == touched["trace"]["first_committed"] == first
    assert batch2["states"] == (
        "differ in 1 of 2 requests, first at pos 27, layer 0, post_commit (request 1)"
    )


def test_a_request_missing_from_a_trace_is_an_error_not_a_verdict(rig):
    # SGLANG_GDN_STATE_TRACE_RIDS restricts the speculative trace to batch 1's request.
    proc = rig.run(_plan(rig, {"SGLANG_GDN_STATE_TRACE_RIDS": "c-b1-0"}))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.splitlines()[-1].startswith(
        "gdn-parity server-parity: error: comparison c, batch 2: trace: rid 'c-b2-0' is not in "
        "both traces"
    )
    batch1, batch2 = rig.results()["comparisons"][0]["batches"]
    assert batch1["met"] is True
    assert (batch2["states"], batch2["met"]) == ("not compared", False)
