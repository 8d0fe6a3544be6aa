"""The drift harness: exact parity holds through it, and the 0.5.23 numerics break it.

The harness runs the real sglang kernels (conv, packed decode, the verify
kernels, the scatter commit); embedding, attention, MLP and lm_head are
row-invariant torch. So with --gdn-verify-exact-parity every speculative mode
must reproduce Base decode exactly: tokens, logits and the committed state of
every GDN layer after every round.
"""

from __future__ import annotations

import pytest
import torch

from gdn_parity.debug.issue35150 import INPUT_IDS
from gdn_parity.drift.run.modes import Mode, ModeKind

TOKENS = 10


@pytest.fixture(scope="module")
def harness(tiny_model):
    from gdn_parity.drift.run import loops

    model = tiny_model
    start, first = loops.prefill(model, list(INPUT_IDS))
    base = loops.run_base(model, start, first, len(INPUT_IDS), TOKENS, lambda n: None)
    return model, start, first, base


def _spec(harness, mode: Mode, exact_parity: bool, seed: int = 0):
    from gdn_parity.drift.run import loops

    model, start, first, base = harness
    model.set_draft_tokens(mode.gamma + 1)
    drafter = loops.OracleDrafter(base.tokens, mode.accept_rate, model.c.vocab, seed)
    return loops.run_spec(
        model, start, first, len(INPUT_IDS), mode, TOKENS, exact_parity, drafter,
        lambda n: None, reference=base,
    )  # fmt: skip


def _assert_bitwise(run, base):
    assert run.tokens == base.tokens
    on_path = [d for d in run.diffs if d.on_path]
    assert len(on_path) >= run.rounds - 1  # the last round may pass Base's end
    for d in on_path:
        assert max(d.ssm_max) == 0 and max(d.conv_max) == 0, d


@pytest.mark.parametrize("gamma", [1, 3])
def test_forced_reject_with_exact_parity_is_base(harness, gamma):
    run = _spec(harness, Mode(ModeKind.FORCED_REJECT, gamma), exact_parity=True)
    assert run.accepted == 0 and run.rounds == TOKENS - 1
    _assert_bitwise(run, harness[3])


@pytest.mark.parametrize("rate", [0.3, 0.7, 1.0])
def test_natural_acceptance_with_exact_parity_is_base(harness, rate):
    run = _spec(harness, Mode(ModeKind.NATURAL, 3, rate), exact_parity=True, seed=int(rate * 10))
    _assert_bitwise(run, harness[3])
    assert run.accepted > 0, "some drafts were accepted, so multi-step commits were checked"


def test_verify_rows_compute_the_logits_of_decode_steps(harness):
    """Row-invariance: verify row t's logits are decode's at that position, bitwise."""
    model, start, first, base = harness
    p = len(INPUT_IDS)
    model.restore(start)
    decode = torch.cat(
        [model.forward([tok], p + i, "decode") for i, tok in enumerate(base.tokens[:4])]
    )
    model.set_draft_tokens(4)
    model.restore(start)
    verify = model.forward(base.tokens[:4], p, "verify", exact_parity=True)
    assert torch.equal(verify, decode)


def test_the_default_verify_kernel_drifts_in_multi_step_commits(harness):
    """Negative control on the patched tree: flag off, natural acceptance differs in state."""
    run = _spec(harness, Mode(ModeKind.NATURAL, 3, 1.0), exact_parity=False)
    assert any(max(d.ssm_max) > 0 for d in run.diffs if d.on_path)


def test_the_0523_numerics_diverge_and_base_decode_is_unchanged(harness, legacy_run):
    base = harness[3]
    assert legacy_run.sglang_tree != harness[0].kernels.tree
    # The series keeps decode's numerics: Base is the same on both trees.
    assert legacy_run.base.tokens[:TOKENS] == base.tokens
    first = legacy_run.mode(ModeKind.FORCED_REJECT).diffs[0]
    assert first.on_path and max(first.ssm_max) > 0, "0.5.23's verify drifts at round 1"
