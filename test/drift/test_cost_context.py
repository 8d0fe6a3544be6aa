"""``cost --context``: the prefill length of every request, the memory rule, the floor's KV
term, the refusals and the table's context column.

The worker's prefill runs on CPU under the interpreter at contexts of 8 and 40 tokens, in
chunks of 16: 40 tokens are three chunks, the last one short. No timing is asserted.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from gdn_parity.debug.issue35150 import INPUT_IDS
from gdn_parity.drift.cost.fit import CostMemory, Unfit, refusal, unfit
from gdn_parity.drift.cost.report import cost_table, not_run
from gdn_parity.drift.cost.results import StepTime, VariantCost
from gdn_parity.drift.model.config import SIZES
from gdn_parity.drift.model.footprint import GIB
from helpers.cli import assert_refused

H100 = int(79.18 * GIB)  # torch's total_memory of an H100 80GB (an OOM message, 2026-12-05)
H200 = int(139.80 * GIB)  # and of an H200 (benchmark/results/2026-12-03-h200-end-to-end)
CHUNK = 16


def _kv_per_token(size: str) -> int:
    """K and V of every attention layer, bf16, from the config's numbers."""
    c = SIZES[size]
    attention_layers = c.layers // c.full_attention_interval
    return attention_layers * 2 * c.attn_kv_heads * c.attn_head_dim * 2


def test_the_27b_holds_64_kib_of_kv_per_token_and_the_floor_reads_it_once():
    """The issue's figure, 16 attention layers x 2 x 4 KV heads x 256 x 2 bytes, and the
    floor's KV term: each request's context and the step's rows, once, whatever γ (16
    requests at 16K: 16 GiB, as the issue estimates)."""
    from gdn_parity.drift.cost.floor import step_bytes

    config, per_token = SIZES["27b"], _kv_per_token("27b")
    assert per_token == 64 * 1024
    lengths = [16384] * 16
    for width in (1, 2, 4):
        moved = step_bytes(config, 2, 2, 2, 2, lengths, width)
        assert moved.kv == 16 * (16384 + width) * per_token
    assert step_bytes(config, 2, 2, 2, 2, lengths, 1).kv / GIB == pytest.approx(16, abs=0.01)
    fp8 = step_bytes(config, 2, 2, 2, 1, lengths, 1)  # an FP8 pool: one byte an element
    assert fp8.kv == 16 * 16385 * per_token // 2


def test_the_memory_rule_counts_the_kv_of_batch_times_context():
    """At the 27B shape with γ up to 3: 16 requests of 32K tokens hold 32 GiB of KV, which
    with 50 GiB of weights passes an H100's 79 GiB, and fit an H200; 64 of 64K hold 256 GiB,
    more than either has. One request of 1K fits both."""
    memory = CostMemory(SIZES["27b"], 2, 2, 2, [1, 3])
    weights = SIZES["27b"].parameters() * 2
    on_h100 = {(u.context, u.batch): u for u in unfit(memory, [1024, 32768], [1, 16], H100)}
    assert set(on_h100) == {(32768, 16)}
    u = on_h100[32768, 16]
    slots = 16 * (32768 + 3 + 2) + 2  # the context, γ + 1 verify rows and one more; 2 spare
    assert u.kv == slots * _kv_per_token("27b")
    assert u.need > weights + u.kv and u.have == H100
    assert u.why().startswith("needs about ") and "(KV cache 32.0 GiB)" in u.why()
    assert u.why().endswith("and the GPU has 79 GiB")
    assert unfit(memory, [32768], [16], H200) == []
    assert [(u.context, u.batch) for u in unfit(memory, [65536], [64], H200)] == [(65536, 64)]


def test_a_run_where_nothing_fits_is_refused_in_one_line_naming_each_need():
    config = SIZES["27b"]
    one = [Unfit(65536, 64, 361 * GIB, 256 * GIB, H100)]
    line = refusal(config, one)
    assert line == (
        "--size 27b at --context 65536 and --batch 64 needs about 361 GiB of GPU memory "
        "(KV cache 256.0 GiB) and the GPU has 79 GiB: pass a smaller --context, --batch or --size"
    )
    two = [*one, Unfit(65536, 16, 126 * GIB, 64 * GIB, H100)]
    line = refusal(config, two)
    assert "\n" not in line and "no --context and --batch pair fits the GPU (79 GiB)" in line
    assert "context 65536 at batch 16 needs about 126 GiB" in line


def test_context_prompts_are_seeded_ids_below_the_vocabulary():
    """Request 0 starts with the reporter's ids; every prompt has ``context`` ids, the drawn
    ones below ``VOCAB_IDS`` (all below the vocabulary: the reporter's reach 248069); the same
    call gives the same prompts; the requests differ."""
    from gdn_parity.drift.cost.prompts import context_prompts
    from gdn_parity.drift.model.server.model import VOCAB_IDS

    prompts = context_prompts(list(INPUT_IDS), 40, 3)
    assert [len(p) for p in prompts] == [40, 40, 40]
    assert prompts[0][:24] == list(INPUT_IDS)
    drawn = prompts[0][24:] + prompts[1] + prompts[2]
    assert all(0 <= t < VOCAB_IDS for t in drawn)
    assert all(t < SIZES["tiny"].vocab for p in prompts for t in p)
    assert context_prompts(list(INPUT_IDS), 40, 3) == prompts
    assert len({tuple(p) for p in prompts}) == 3
    assert context_prompts(list(INPUT_IDS), 8, 1) == [list(INPUT_IDS[:8])]


def _variant(name: str, context_ms: dict[tuple[int, int], float]) -> VariantCost:
    steps = [
        StepTime(phase, n, n, width, ms * width, ms, ms, 5, True, "", 10**9, 0.5, [], context)
        for (context, n), ms in context_ms.items()
        for phase, width in (("decode", 1), ("verify", 2))
    ]
    return VariantCost(name, "tree", "cuda", "27b", "bfloat16", [], steps, 1.0, 2e12)


def test_the_table_has_a_context_column_and_a_row_for_each_pair_not_run():
    """Per context and N, each variant's steps; a pair that did not fit is one row, in its
    place, that says what it needs; above the table a line names every such pair."""
    timed = {(8, 2): 1.0, (8, 4): 2.0, (40, 2): 3.0}
    results = [_variant("A", timed), _variant("B", {k: 2 * v for k, v in timed.items()})]
    skipped = [Unfit(40, 4, 90 * GIB, 30 * GIB, H100)]
    table = cost_table(results, [2, 4], [1], [8, 40], skipped)
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in table.splitlines()[2:]]
    assert table.splitlines()[0].split("|")[3].strip() == "context"
    assert [(c[2], c[3], c[0], c[4]) for c in cells] == [
        (ctx, n, v, step)
        for ctx, n in (("8", "2"), ("8", "4"), ("40", "2"))
        for v in ("A", "B")
        for step in ("decode", "verify γ=1")
    ] + [("40", "4", "**not run**", "all")]
    assert cells[8][6:8] == ["3.000 (3.000-3.000)", "1.00x"]  # A, context 40, N 2, decode
    assert cells[10][6:8] == ["6.000 (6.000-6.000)", "2.00x"]  # B against A's, same context
    assert cells[-1][6] == "did not fit"
    assert cells[-1][-1] == (
        "needs about 90 GiB of GPU memory (KV cache 30.0 GiB) and the GPU has 79 GiB"
    )
    assert not_run(skipped)[0].startswith(
        "**Not run: 1 (context, N) pair(s) did not fit the GPU** (context 40 at N = 4)"
    )
    assert not_run([]) == []


def test_cost_refuses_a_context_past_the_models_context_length(tmp_path, run_cli):
    """Qwen3.5's max_position_embeddings, 262144: the verify of γ = 3 at a context of 262140
    reaches position 262143, the last; one more token is refused, before any other check
    (here the missing GPU is the next one)."""
    out = tmp_path / "out"
    proc = run_cli("cost", "--context", "1024,262141", "--out", str(out))
    assert_refused(
        proc,
        "--context 262141 and --gamma 3: the verify reaches position 262144, past the model's "
        "context length, 262144 (Qwen3.5's max_position_embeddings): pass a --context of at "
        "most 262140",
    )
    assert_refused(
        run_cli("cost", "--context", "262140", "--out", str(out)), "torch finds no CUDA device"
    )
    assert_refused(run_cli("cost", "--context", "8,8", "--out", str(out)), "names a context twice")
    assert_refused(run_cli("cost", "--context", "0", "--out", str(out)), "must be at least 1")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def gpu_of(monkeypatch):
    """``gpu_of(bytes)``: torch then reports one CUDA device of that much memory. The memory
    rule reads nothing else of it; nothing here reaches a GPU (the workers are replaced)."""

    def fake(total: int) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(
            torch.cuda,
            "get_device_properties",
            lambda device=0: SimpleNamespace(total_memory=total),
        )

    return fake


def test_cost_refuses_a_run_none_of_whose_pairs_fit_naming_the_memory(tmp_path, capsys, gpu_of):
    from gdn_parity.cli.main import main

    gpu_of(H100)
    out = tmp_path / "out"
    code = main(["cost", "--size", "27b", "--context", "65536", "--batch", "64", "--out", str(out)])
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("gdn-parity cost: error: --size 27b at --context 65536 and --batch 64")
    assert "(KV cache 256.0 GiB) and the GPU has 79 GiB" in err[0]
    assert list(tmp_path.iterdir()) == []


def test_cost_skips_the_pairs_that_do_not_fit_says_so_and_times_the_others(
    tmp_path, capsys, gpu_of, monkeypatch
):
    """On an H100, 16 requests of 32K tokens do not fit (32 GiB of KV beside 50 GiB of
    weights); the other pairs run, seeded, and the page and stderr name the one skipped.
    (Workers replaced by results of their jobs' pairs: the plan is checked, not the GPU.)"""
    from gdn_parity.cli.main import main
    from gdn_parity.drift.cost import plan as cost_plan

    gpu_of(H100)
    monkeypatch.setattr(cost_plan, "variant_tree", lambda series, v: tmp_path / v.name)
    jobs = []

    def fake_workers(module, batch, parallel, device, bar, result_type):
        (job,) = batch
        jobs.append(job)
        return [_variant(job.variant, dict.fromkeys(job.runs, 1.0))]

    monkeypatch.setattr(cost_plan, "run_workers", fake_workers)
    out = tmp_path / "out"
    args = ["cost", "--size", "27b", "--context", "1024,32768", "--batch", "1,16", "--gamma", "1"]
    code = main([*args, "--variants", "0.5.23,deterministic-exact-parity", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert [(j.runs, j.seeded) for j in jobs] == [([(1024, 1), (1024, 16), (32768, 1)], True)] * 2
    warnings = [line for line in captured.err.splitlines() if "warning" in line]
    assert len(warnings) == 1
    assert warnings[0].startswith(
        "gdn-parity cost: warning: skipping 1 (context, batch) pair(s) that do not fit the GPU: "
        "context 32768 at batch 16 needs about "
    )
    page = (out / "cost.md").read_text()
    assert "**Not run: 1 (context, N) pair(s) did not fit the GPU** (context 32768 at N = 16)" in (
        page
    )
    (row,) = [line for line in page.splitlines() if line.startswith("| **not run**")]
    assert [c.strip() for c in row.split("|")[3:5]] == ["32768", "16"]


# -- the worker's prefill, on CPU under the interpreter ------------------------------------


def _job(chunk: int, seeded: bool = True):
    from gdn_parity.drift.cost.worker import CostJob

    return CostJob(
        variant="0.5.23", tree="", exact_parity=False, deterministic=False, isolate=None,
        size="tiny", device="cpu", prompt=list(INPUT_IDS), runs=[], gammas=[1], seeded=seeded,
        prefill_chunk=chunk,
    )  # fmt: skip


@pytest.fixture(scope="module")
def tiny_weights(sglang_tree):
    from gdn_parity.drift.model.weights import make_weights

    return make_weights(SIZES["tiny"], "cpu")


@pytest.fixture(scope="module")
def prefilled(tiny_weights):
    """The worker's model and its requests' last prefill logits at contexts 8 and 40, three
    requests, in chunks of 16."""
    from gdn_parity.drift.cost.worker import prefilled

    return {context: prefilled(_job(CHUNK), context, 3, tiny_weights) for context in (8, 40)}


def _filled(model) -> list[int]:
    """Per request, how many of its KV slots hold a key, and that they are its first ones."""
    keys = model.attn.token_to_kv_pool.k_buffer[0]
    counts = []
    for i in range(model.n):
        written = keys[model.kv_slots[i].long()].flatten(1).ne(0).any(1).tolist()
        count = sum(written)
        assert written == [True] * count + [False] * (len(written) - count)
        counts.append(count)
    return counts


@pytest.mark.slow
def test_the_context_is_the_prefill_length_every_request_holds(prefilled):
    """After the worker's prefill, each request's committed length and its filled KV slots
    are the context, also where the prompt took three chunks."""
    for context, (model, _) in prefilled.items():
        assert [r.length for r in model.requests] == [context] * 3
        assert _filled(model) == [context] * 3
        assert model.max_len == context + 1 + 2  # the context, γ + 1 rows, one more


@pytest.mark.slow
def test_a_chunked_prefill_computes_what_one_forward_does(prefilled, tiny_weights):
    """40 tokens in chunks of 16 against one forward of 40: the keys, values, GDN states and
    the last token's logits agree to bf16 roundings. A chunk that ignored its prefix (the conv
    window, the state, or the cached KV its attention reads) would leave them far apart: the
    tiny model's one attention layer is its last, so only the logits see the last."""
    from gdn_parity.drift.cost.worker import prefilled as worker_prefilled

    (chunked, chunked_logits), (whole, whole_logits) = (
        prefilled[40],
        worker_prefilled(_job(64), 40, 3, tiny_weights),
    )
    pool_a, pool_b = chunked.attn.token_to_kv_pool, whole.attn.token_to_kv_pool
    pairs = [
        *zip(pool_a.k_buffer, pool_b.k_buffer, strict=True),
        *zip(pool_a.v_buffer, pool_b.v_buffer, strict=True),
        (chunked.state.temporal, whole.state.temporal),
        (chunked.state.conv[0], whole.state.conv[0]),
        (chunked_logits, whole_logits),
    ]
    for a, b in pairs:
        scale = b.float().abs().max()
        assert scale > 0
        assert (a.float() - b.float()).abs().max() <= 0.02 * scale


@pytest.mark.slow
def test_the_floor_grows_by_each_requests_context_of_kv(prefilled):
    """The step's bytes at a context of 40 less those at 8: 32 tokens of KV per request, the
    tiny model's 128 bytes a token (one attention layer, 2 KV heads of 16, K and V, bf16)."""
    from gdn_parity.drift.cost.timing import time_step

    moved = {
        context: time_step(model, "decode", 1, 1, False, 1e12, warmup=0).bytes
        for context, (model, _) in prefilled.items()
    }
    assert _kv_per_token("tiny") == 128
    assert moved[40] - moved[8] == 3 * 32 * 128
