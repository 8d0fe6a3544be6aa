"""The server-faithful stack: what must hold through sglang's backends, and a control that fails.

The server stack runs a padded batch (3 requests, padded to the CUDA-graph size
4) through TritonAttnBackend and GDNAttnBackend, one GEMM per linear layer. On
the CPU test bed torch's bf16 GEMMs are row-count invariant and sglang's
batch-invariant ops do not apply (they are CUDA-only), so what these tests
exercise is the backends' own kernel choices per forward mode.
"""

from __future__ import annotations

import pytest
import torch

from gdn_parity.debug.issue35150 import INPUT_IDS
from gdn_parity.drift.model.stacks import StackSpec, build_stack, default_stack
from gdn_parity.drift.run.modes import Mode, ModeKind

pytestmark = pytest.mark.slow  # two server-stack runs under the interpreter (~2 min)

TOKENS = 5
REQUESTS = 3  # padded to 4: one padded row in every batch


def _server(deterministic: bool, exact_parity: bool):
    from gdn_parity.drift.run import loops

    model = build_stack(
        StackSpec(
            "server", "tiny", "cpu", max_len=48, deterministic=deterministic,
            exact_parity=exact_parity, requests=REQUESTS,
        )
    )  # fmt: skip
    start, first = loops.prefill(model, list(INPUT_IDS))
    base = loops.run_base(model, start, first, len(INPUT_IDS), TOKENS, lambda n: None)
    return model, start, first, base


def _spec(harness, mode: Mode):
    from gdn_parity.drift.run import loops

    model, start, first, base = harness
    model.set_draft_tokens(mode.gamma + 1)
    drafter = loops.OracleDrafter(base.tokens, mode.accept_rate, model.c.vocab, 0)
    return loops.run_spec(
        model, start, first, len(INPUT_IDS), mode, TOKENS, model.numerics.exact_parity,
        drafter, lambda n: None, reference=base,
    )  # fmt: skip


@pytest.fixture(scope="module")
def exact(sglang_tree):
    """--enable-deterministic-inference + --gdn-verify-exact-parity, on the series (0006)."""
    return _server(deterministic=True, exact_parity=True)


@pytest.fixture(scope="module")
def deterministic_only(sglang_tree):
    return _server(deterministic=True, exact_parity=False)


def test_the_batch_is_padded_as_cuda_graphs_pad_it(exact):
    model = exact[0]
    assert (model.n, model.bs) == (REQUESTS, 4)
    assert model.attn.verify_as_decode, "0006's route is on under deterministic inference"


def test_verify_rows_compute_the_logits_of_decode_steps(exact):
    """The contract: with 0006 and the flag, a verify row is the decode step, bitwise."""
    model, start, _, base = exact
    p = len(INPUT_IDS)
    model.restore(start)
    decode = torch.stack(
        [model.forward([t], p + i, "decode")[0] for i, t in enumerate(base.tokens[:3])]
    )
    model.set_draft_tokens(3)
    model.restore(start)
    verify = model.forward(base.tokens[:3], p, "verify", exact_parity=True)
    assert torch.equal(verify, decode)


@pytest.mark.parametrize("mode", [Mode(ModeKind.FORCED_REJECT, 1), Mode(ModeKind.NATURAL, 3, 1.0)])
def test_exact_variant_is_base_in_every_mode(exact, mode):
    run = _spec(exact, mode)
    assert run.tokens == exact[3].tokens
    on_path = [d for d in run.diffs if d.on_path]
    assert on_path and all(d.max_diff == 0 for d in on_path), on_path


def test_negative_control_deterministic_alone_drifts(deterministic_only):
    """Flag off, the default GDN verify kernel: multi-step commits differ from Base's state."""
    run = _spec(deterministic_only, Mode(ModeKind.NATURAL, 3, 1.0))
    assert run.accepted > 0
    assert any(d.max_diff > 0 for d in run.diffs if d.on_path)


def test_the_stacks_compute_the_same_model(exact, tiny_model):
    """Row-wise and server stacks: one model, so the same Base tokens and close logits.

    Not bitwise: the server's RMSNorms are sglang's Triton kernels, the row-wise
    stack's torch. A wrong weight layout, rope position or KV slot fails this.
    """
    from gdn_parity.drift.run import loops

    server, start, first, base = exact
    rw_start, rw_first = loops.prefill(tiny_model, list(INPUT_IDS))
    rw_base = loops.run_base(tiny_model, rw_start, rw_first, len(INPUT_IDS), TOKENS, lambda n: 0)
    assert rw_base.tokens == base.tokens
    p = len(INPUT_IDS)
    tiny_model.restore(rw_start)
    server.restore(start)
    ours = server.forward([base.tokens[0]], p, "decode")
    theirs = tiny_model.forward([base.tokens[0]], p, "decode")
    assert torch.allclose(ours, theirs, atol=2e-2 * theirs.abs().max().item())


def test_stack_defaults_and_refusals():
    assert default_stack("cuda") == "server" and default_stack("cpu") == "rowwise"
    with pytest.raises(ValueError, match="--stack server"):
        build_stack(StackSpec("rowwise", "tiny", "cpu", max_len=8, deterministic=True))
