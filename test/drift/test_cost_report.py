"""The cost table: medians with their spread, ratios to the first variant, the floor."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import torch

from gdn_parity.drift.cost.report import cost_table, eager_steps, kernel_tables
from gdn_parity.drift.cost.results import KernelTime, StepTime, VariantCost


def _variant(name: str, decode: tuple[float, float, float], verify: tuple[float, float, float]):
    def step(phase: str, width: int, times: tuple[float, float, float]) -> StepTime:
        median, low, p90 = times
        return StepTime(phase, 4, 4, width, median, low, p90, 50, True, "", 10**9, 0.5)

    steps = [step("decode", 1, decode), step("verify", 4, verify)]
    return VariantCost(name, "tree", "cuda", "large", "bfloat16", ["gdn"], steps, 1.0, 2e12)


def test_rows_show_median_min_p90_and_the_ratio_to_the_first_variant():
    table = cost_table(
        [
            _variant("0.5.23", (2.0, 1.9, 2.2), (4.0, 3.8, 4.4)),
            _variant("exact", (2.5, 2.4, 2.9), (5.0, 4.9, 5.5)),
        ],
        [4],
        [3],
    )
    rows = [line.split("|")[1:-1] for line in table.splitlines()[2:]]
    cells = [[c.strip() for c in row] for row in rows]
    assert [c[4] for c in cells] == ["decode", "verify γ=3"] * 2
    assert {c[2] for c in cells} == {"24"}  # the reporter's prompt: request 0's 24 tokens
    assert cells[0][6:10] == ["2.000 (1.900-2.200)", "1.00x", "0.500", "4.00x"]
    assert cells[1][6:10] == ["4.000 (3.800-4.400)", "1.00x", "0.500", "8.00x"]
    assert cells[2][6:10] == ["2.500 (2.400-2.900)", "1.25x", "0.500", "5.00x"]
    assert cells[3][6:10] == ["5.000 (4.900-5.500)", "1.25x", "0.500", "10.00x"]


def test_rounds_give_the_median_of_the_rounds_and_a_ratio_taken_within_each_round():
    """``cost --rounds 3``: B's decode took 2.6, 3.3 and 1.2 ms against A's 2.0, 3.0 and 1.0 in
    the same rounds. Within-round ratios 1.3, 1.1, 1.2: median 1.2, where the ratio of the
    medians (2.6 / 2.0) would say 1.3."""
    rounds = []
    for i, (a, b) in enumerate([(2.0, 2.6), (3.0, 3.3), (1.0, 1.2)]):
        for name, ms in (("A", a), ("B", b)):
            run = _variant(name, (ms, ms, ms), (4.0, 4.0, 4.0))
            rounds.append(dataclasses.replace(run, round=i))
    table = cost_table(rounds, [4], [3])
    lines = table.splitlines()
    assert "ratio, median of rounds (lowest-highest)" in lines[0]
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in lines[2:]]
    assert [(c[0], c[4]) for c in cells] == [
        ("A", "decode"),
        ("A", "verify γ=3"),
        ("B", "decode"),
        ("B", "verify γ=3"),
    ]
    assert cells[0][6:10] == ["2.000 (1.000-3.000)", "1.000x (1.000-1.000)", "0.500", "4.00x"]
    assert cells[2][6:10] == ["2.600 (1.200-3.300)", "1.200x (1.100-1.300)", "0.500", "5.20x"]
    assert cells[3][6:8] == ["4.000 (4.000-4.000)", "1.000x (1.000-1.000)"]


def test_with_rounds_an_eager_step_names_its_round_and_the_legend_the_bandwidths():
    """With rounds, a step timed eagerly names its round, the first one too; the legend
    gives the workers' bandwidth range and says how the rounds ran."""
    from gdn_parity.drift.cost.report import legend

    failed = StepTime(
        "verify", 4, 4, 4, 9.0, 8.0, 9.5, 50, False,
        "eager: the capture failed (RuntimeError: operation not permitted)", 10**9, 0.5,
    )  # fmt: skip
    ok = _variant("B", (2.0, 2.0, 2.0), (4.0, 4.0, 4.0))
    first = dataclasses.replace(ok, steps=[ok.steps[0], failed], round=0)
    second = dataclasses.replace(ok, round=1)
    assert "B (round 1) context 24 N=4 verify γ=3" in eager_steps([first, second])
    text = legend("A", 30, [2e12, 3e12, 2.5e12], rounds=3)
    assert "in alternating order" in text and "(2.00-3.00 TB/s" in text
    assert "(2.00 TB/s" in legend("A", 30, [2e12], rounds=1)


def test_rounds_run_the_variants_in_turn_in_alternating_order(monkeypatch, tmp_path):
    """A, B, then B, A: neither variant always runs first (a drift of the clocks over the run
    would bias every round's ratio the same way); each job its round and its own raw file
    (trees aside: not built here)."""
    from gdn_parity.drift.cost import plan as cost_plan
    from gdn_parity.drift.run.variants import variant_named

    monkeypatch.setattr(cost_plan, "variant_tree", lambda series, v: tmp_path / v.name)
    variants = [variant_named("0.5.23"), variant_named("deterministic-exact-parity")]
    plan = cost_plan.CostPlan(
        variants, "27b", "cuda", [1], "bfloat16", [64], [3], 30, True, tmp_path, rounds=2
    )
    jobs = cost_plan.cost_jobs(None, plan, tmp_path)
    assert [(j.variant, j.round) for j in jobs] == [
        ("0.5.23", 0),
        ("deterministic-exact-parity", 0),
        ("deterministic-exact-parity", 1),
        ("0.5.23", 1),
    ]
    assert len({j.out for j in jobs}) == 4


def test_the_floor_counts_every_weight_but_the_embedding_and_each_requests_state():
    """Bytes by hand for the tiny model (3 GDN layers, 1 attention layer) against the
    tensors make_weights actually makes."""
    from gdn_parity.drift.cost.floor import step_bytes
    from gdn_parity.drift.model.config import SIZES
    from gdn_parity.drift.model.weights import make_weights

    config = SIZES["tiny"]
    w = make_weights(config, "cpu")
    tensors = [w.lm_head, w.final_norm]
    for layer in w.layers:
        m = layer.mixer
        parts = (
            [m.qkvz, m.ba, m.conv, m.A_log, m.dt_bias, m.norm, m.out]
            if hasattr(m, "qkvz")
            else [m.qkv, m.q_norm, m.k_norm, m.o]
        )
        tensors += parts + [layer.input_norm, layer.post_norm, layer.gate_up, layer.down]
    weight_elements = sum(t.numel() for t in tensors)
    # GDN: 2 v heads of 16 x 16 in bf16, conv window 3 x qkv_dim 64 in bf16, 3 layers.
    state_per_request = 3 * (2 * 16 * 16 * 2 + 3 * 64 * 2)
    # KV: 1 attention layer, K and V of 2 heads of 16 in bf16 per token.
    kv_per_token = 2 * 2 * 16 * 2

    decode = step_bytes(config, 2, 2, 2, 2, [10, 20], 1)
    assert decode.weights == weight_elements * 2
    assert decode.state == state_per_request * 2 * 2  # read + write, 2 requests
    assert decode.kv == kv_per_token * (11 + 21)
    verify = step_bytes(config, 2, 2, 2, 2, [10, 20], 4)
    assert verify.state == state_per_request * 5 * 2  # read + 4 snapshots, 2 requests
    assert verify.total == verify.weights + verify.state + verify.kv


def test_a_size_that_does_not_fit_is_refused_with_the_memory_it_needs():
    from gdn_parity.drift.model.config import SIZES
    from gdn_parity.drift.model.footprint import GIB, RunHolds, fit_problem

    config, holds = SIZES["27b"], RunHolds(64, 5, context=30)
    assert fit_problem(config, 2, 2, holds, 1, 139 * GIB) is None
    problem = fit_problem(config, 2, 2, holds, 3, 139 * GIB)
    assert problem is not None and problem.startswith("--size 27b needs about 3 x ")
    assert "pass fewer --jobs" in problem and "\n" not in problem
    assert "a smaller --size or --batch" in fit_problem(config, 2, 4, holds, 1, 60 * GIB)


def test_an_h100_takes_the_27b_at_batch_64_with_the_snapshots_in_host_memory():
    """``cost --size 27b --batch 64 --gamma 1,3`` ran out of memory on an H100 (79.18 GiB,
    2026-12-05) when a snapshot of the SSM states asked for 4.57 GiB more on the GPU; session
    18 then counted two snapshots and refused batch 64 there (about 86 GiB). The snapshots
    are now in host memory (``ServerModel.snapshot``), so the GPU holds the weights, the GDN
    and KV pools and the logits (``test_the_footprint_counts_the_pools_the_stack_allocates``
    checks the pools against the stack's): about 78 GiB, which the H100 takes, by 1 GiB.
    fp32 states (twice the SSM pools) and a 300-token demo's kept states do not fit."""
    from gdn_parity.drift.model.config import SIZES
    from gdn_parity.drift.model.footprint import GIB, RunHolds, fit_problem

    config, h100 = SIZES["27b"], int(79.18 * GIB)
    cost = RunHolds(64, 4, context=24 + 4 + 1)  # cost's max_len: the prompt, gamma 3, 2
    assert fit_problem(config, 2, 2, cost, 1, h100) is None
    problem = fit_problem(config, 2, 4, cost, 1, h100)
    assert problem is not None and problem.startswith("--size 27b needs about 101 GiB")
    demo = RunHolds(64, 5, context=24 + 300 + 5, kept_states=300)
    assert fit_problem(config, 2, 2, demo, 1, 139 * GIB) is None
    assert fit_problem(config, 2, 2, demo, 1, h100).startswith("--size 27b needs about 106 GiB")


def test_a_step_whose_capture_failed_is_named():
    """A capture that fails (the alt-stream overlaps, a kernel that cannot be captured) puts
    an eager time beside graph replays: ``cost`` names those steps on stderr. Asked for
    eager (--no-graphs) or a graph that ran, nothing."""
    ok = _variant("0.5.23", (2.0, 1.9, 2.2), (4.0, 3.8, 4.4))
    assert eager_steps([ok]) is None
    failed = StepTime(
        "verify", 4, 4, 4, 9.0, 8.0, 9.5, 50, False,
        "eager: the capture failed (RuntimeError: operation not permitted)", 10**9, 0.5,
    )  # fmt: skip
    broken = VariantCost(
        "exact", "tree", "cuda", "large", "bfloat16", [], [ok.steps[0], failed], 1.0, 2e12
    )
    asked = StepTime("decode", 4, 4, 1, 9.0, 8.0, 9.5, 50, False, "eager: --no-graphs", 1, 0.5)
    eager = VariantCost("e", "tree", "cuda", "large", "bfloat16", [], [asked], 1.0, 2e12)
    assert eager_steps([ok, broken, eager]) == (
        "1 step(s) timed eagerly because their CUDA-graph capture failed (the 'timed' "
        "column says why): exact context 24 N=4 verify γ=3"
    )


def _profiled(
    name: str, kernels: list[KernelTime], median_ms: float, round_: int = 0
) -> VariantCost:
    step = StepTime("decode", 4, 4, 1, median_ms, 1.0, 3.0, 50, True, "", 10**9, 0.5, kernels)
    return VariantCost(
        name, "tree", "cuda", "large", "bfloat16", [], [step], 1.0, 2e12, round=round_
    )


def test_the_profile_puts_each_variants_kernels_side_by_side_longest_first():
    """``cost --profile``: per step, the union of each variant's longest kernels, ordered by the
    longest time either takes, "-" where a variant runs no such kernel, then the rest summed, all
    kernels, and the first round's timed step. A profile without kernels says so; without
    profiles, no section."""
    profiles = [
        _profiled(
            "0.5.23",
            [KernelTime("void nvjet_gemm<1>(int)", 2.0, 1.2), KernelTime("rmsnorm", 4.0, 0.2),
             KernelTime("copy", 1.0, 0.05)],
            9.0,
        ),
        _profiled(
            "exact",
            [KernelTime("matmul_kernel_few_rows", 2.0, 1.3), KernelTime("rmsnorm", 4.0, 0.3),
             KernelTime("copy", 1.0, 0.1)],
            9.0,
        ),
    ]  # fmt: skip
    results = [  # as the rounds ran: the table's step is the first round's
        _profiled("0.5.23", [], 1.6),
        _profiled("exact", [], 1.8),
        _profiled("exact", [], 1.9, round_=1),
        _profiled("0.5.23", [], 1.5, round_=1),
    ]
    section = kernel_tables(results, profiles, [(24, 4)], [], shown=2)
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert rows == [
        "| kernel | 0.5.23 | exact |",
        "| `matmul_kernel_few_rows` | - | 1.300 (2) |",
        "| `nvjet_gemm<1>` | 1.200 (2) | - |",
        "| `rmsnorm` | 0.200 (4) | 0.300 (4) |",
        "| other kernels | 0.050 | 0.100 |",
        "| **all kernels** | 1.450 | 1.700 |",
        "| **step** | 1.600 | 1.800 |",
    ]
    assert "context 24, N = 4, decode:" in section
    lost = kernel_tables(results[:2], [profiles[0], _profiled("exact", [], 9.0)], [(24, 4)], [], 2)
    assert "| other kernels | 0.050 | - |" in lost
    assert "| **all kernels** | 1.450 | none recorded |" in lost
    assert kernel_tables(results, [], [(24, 4)], []) is None


def test_kernel_times_keep_the_devices_kernels_per_forward():
    """``per_call`` over the profiler's averages: on CUDA the device's kernels only (the host's
    ops, whose times include their kernels, and ``record_function`` ranges on the device
    left out), their launches and device time divided by the forwards profiled, longest
    first."""
    from torch.autograd import DeviceType

    from gdn_parity.drift.cost.timing import per_call

    def event(key, device, count, device_us, cpu_us=0.0, annotation=False):
        return SimpleNamespace(
            key=key, device_type=device, count=count, self_device_time_total=device_us,
            self_cpu_time_total=cpu_us, is_user_annotation=annotation,
        )  # fmt: skip

    averages = [
        event("aten::mm", DeviceType.CPU, 6, 900.0, cpu_us=50.0),
        event("few_rows", DeviceType.CUDA, 6, 900.0),
        event("forward", DeviceType.CUDA, 3, 3000.0, annotation=True),
        event("rmsnorm", DeviceType.CUDA, 12, 1200.0),
    ]
    assert per_call(averages, 3, cuda=True) == [
        KernelTime("rmsnorm", 4.0, 0.4),
        KernelTime("few_rows", 2.0, 0.3),
    ]
    assert per_call(averages, 3, cuda=False) == [KernelTime("aten::mm", 2.0, 50.0 / 3 / 1e3)]


def test_profile_jobs_come_after_the_timed_ones_in_processes_of_their_own(tmp_path, monkeypatch):
    """``--profile`` adds one job per variant that profiles, captures no graph and whose times
    are not the table's; the timed jobs stay as they were; without it, none."""
    from gdn_parity.drift.cost import plan as cost_plan
    from gdn_parity.drift.run.variants import variant_named

    monkeypatch.setattr(cost_plan, "variant_tree", lambda series, v: tmp_path / v.name)
    variants = [variant_named("0.5.23"), variant_named("deterministic-exact-parity")]
    plan = cost_plan.CostPlan(
        variants, "27b", "cuda", [1], "bfloat16", [64], [3], 30, True, tmp_path, rounds=2
    )
    assert cost_plan.profile_jobs(None, plan, tmp_path) == []
    profiled = dataclasses.replace(plan, profile=True)
    timed = cost_plan.cost_jobs(None, profiled, tmp_path)
    assert timed == cost_plan.cost_jobs(None, plan, tmp_path)
    jobs = cost_plan.profile_jobs(None, profiled, tmp_path)
    assert [(j.variant, j.profile, j.graphs, j.replays) for j in jobs] == [
        ("0.5.23", True, False, 1),
        ("deterministic-exact-parity", True, False, 1),
    ]
    assert not {j.out for j in jobs} & {j.out for j in timed}


def test_a_steps_kernels_survive_the_workers_json():
    """The worker writes ``VariantCost`` as JSON and the parent reads it back: the kernels come
    back as ``KernelTime``, not as dicts the report cannot read."""
    sent = _profiled("exact", [KernelTime("matmul_kernel_few_rows", 2.0, 1.3)], 1.8)
    back = VariantCost.from_json(json.dumps(sent.to_dict()))
    assert back == sent
    assert isinstance(back.steps[0].kernels[0], KernelTime)
    old = sent.to_dict()
    del old["steps"][0]["kernels"]  # a cost.json from before --profile
    assert VariantCost.from_json(json.dumps(old)).steps[0].kernels == []


def test_kernel_times_are_per_call_of_the_profiled_function():
    """``kernel_times`` runs the function several times under the profiler and divides by
    that: two matmuls and one add per call are 2 and 1 launches, longest first. (On CPU it
    profiles ops, not CUDA kernels: the arithmetic, not a GPU's profile.)"""
    from gdn_parity.drift.cost.timing import kernel_times

    a = torch.randn(256, 256)

    def run() -> None:
        torch.mm(a, a)
        torch.mm(a, a)
        torch.add(a, a)

    kernels = kernel_times(run, cuda=False, calls=3)
    by_name = {k.name: k for k in kernels}
    assert by_name["aten::mm"].calls == 2.0
    assert by_name["aten::add"].calls == 1.0
    assert all(k.ms >= 0 for k in kernels) and by_name["aten::mm"].ms > 0
    assert [k.ms for k in kernels] == sorted((k.ms for k in kernels), reverse=True)


def test_kernel_names_are_cut_to_be_read_and_told_apart():
    """A table shows a kernel without ``void`` and its parameter list (a copy's or a fill's
    bracket stays), a long name as its head and tail, ``|`` escaped; two kernels cut to the
    same text are numbered."""
    from gdn_parity.drift.cost.report import short_name

    assert short_name("void f<(int)1>(float*, int)::{lambda(int)#1}(int)") == (
        "f<(int)1>(float*, int)::{lambda(int)#1}"
    )
    assert short_name("Memcpy HtoD (Pageable -> Device)") == "Memcpy HtoD (Pageable -> Device)"
    assert short_name("a|b") == "a\\|b"
    long_a, long_b = (
        "k<" + "x" * 100 + "Mul" + "y" * 30 + ">",
        "k<" + "x" * 100 + "Div" + "y" * 30 + ">",
    )
    assert short_name(long_a) == short_name(long_b) and len(short_name(long_a)) == 85
    profiles = [_profiled("v", [KernelTime(long_a, 1.0, 0.2), KernelTime(long_b, 1.0, 0.1)], 1)]
    section = kernel_tables([_profiled("v", [], 1.0)], profiles, [(24, 4)], [])
    assert f"| `{short_name(long_a)}` | 0.200 (1) |" in section
    assert f"| `{short_name(long_a)} [2]` | 0.100 (1) |" in section


def test_cost_writes_the_timed_table_before_profiling_and_keeps_it_if_the_profile_fails(
    tmp_path, monkeypatch
):
    """``run_cost`` with ``--profile``: the timed jobs' results are the table and ``cost.json``,
    the profile jobs' the section and ``profile.json``; a profile that fails leaves the timed
    table, with a line saying so. (Workers replaced by their results: the split is checked,
    not the GPU.)"""
    from gdn_parity.drift.cost import plan as cost_plan
    from gdn_parity.drift.run.variants import variant_named
    from gdn_parity.errors import GdnParityError

    monkeypatch.setattr(cost_plan, "variant_tree", lambda series, v: tmp_path / v.name)
    plan = cost_plan.CostPlan(
        [variant_named("0.5.23"), variant_named("deterministic-exact-parity")], "large", "cuda",
        [1], "bfloat16", [4], [3], 30, True, tmp_path / "out", profile=True,
    )  # fmt: skip

    def worker(name, job, median, kernels):
        ((context, _),) = job.runs
        step = lambda phase, w: StepTime(  # noqa: E731
            phase, 4, 4, w, median, median, median, 30, not job.profile, "", 10**9, 0.5, kernels,
            context,
        )  # fmt: skip
        return VariantCost(
            job.variant, "tree", "cuda", "large", "bfloat16", [], [step("decode", 1),
            step("verify", 4)], 1.0, 2e12, round=job.round,
        )  # fmt: skip

    ran = []

    def fake_workers(module, jobs, parallel, device, bar, result_type):
        (job,) = jobs
        ran.append((job.variant, job.profile))
        if job.profile:
            return [worker(job.variant, job, 99.0, [KernelTime(f"k_{job.variant}", 1.0, 0.5)])]
        return [worker(job.variant, job, 2.0, [])]

    monkeypatch.setattr(cost_plan, "run_workers", fake_workers)
    report = cost_plan.run_cost(None, plan)
    assert ran == [
        ("0.5.23", False), ("deterministic-exact-parity", False),
        ("0.5.23", True), ("deterministic-exact-parity", True),
    ]  # fmt: skip
    out = tmp_path / "out"
    timed = [
        VariantCost.from_json(json.dumps(r)) for r in json.loads((out / "cost.json").read_text())
    ]
    assert {s.median_ms for r in timed for s in r.steps} == {2.0}
    profiled = json.loads((out / "profile.json").read_text())
    assert [p["steps"][0]["kernels"][0]["name"] for p in profiled] == [
        "k_0.5.23", "k_deterministic-exact-parity",
    ]  # fmt: skip
    assert "| `k_0.5.23` | 0.500 (1) | - |" in report and "| **step** | 2.000 | 2.000 |" in report
    assert (out / "cost.md").read_text() == report

    def failing_profile(module, jobs, parallel, device, bar, result_type):
        if jobs[0].profile:
            raise GdnParityError("worker deterministic-exact-parity failed: CUDA error\nlog: x")
        return fake_workers(module, jobs, parallel, device, bar, result_type)

    monkeypatch.setattr(cost_plan, "run_workers", failing_profile)
    report = cost_plan.run_cost(None, plan)
    assert "| **step**" not in report and "1.00x" in report
    assert "The profile (`--profile`) failed: worker deterministic-exact-parity failed" in report
    assert not (out / "profile.json").exists()
