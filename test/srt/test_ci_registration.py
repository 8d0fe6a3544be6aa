"""The series' registered tests name CI suites that upstream's runner accepts.

Upstream's ``test/run_suite.py`` (not in the release wheel) refuses, before
running anything, a registered test whose effective suite is not one of its
per-commit suites: ``{stage}-test-{runner_config}`` when a stage and a runner
config are given, else ``suite``. The names below are the per-commit suites of
that file that fit the series' tests.
"""

from __future__ import annotations

import ast

from gdn_parity.queue.changes import series_changes

REGISTERED = "test/registered/"
PER_COMMIT_SUITES = {
    "register_cpu_ci": {"base-a-test-cpu", "base-b-test-cpu", "base-c-test-cpu"},
    "register_cuda_ci": {
        "base-a-test-1-gpu-small",
        "base-b-test-1-gpu-small",
        "base-b-test-1-gpu-large",
        "base-b-kernel-unit-test-1-gpu-large",
    },
}


def _effective_suites(source: str) -> list[tuple[str, str]]:
    """(marker, effective suite) of every registration call in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        marker = getattr(getattr(node, "func", None), "id", None)
        if not isinstance(node, ast.Call) or marker not in PER_COMMIT_SUITES:
            continue
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
        if len(node.args) > 1:
            kwargs["suite"] = ast.literal_eval(node.args[1])
        if "stage" in kwargs:
            found.append((marker, f"{kwargs['stage']}-test-{kwargs['runner_config']}"))
        else:
            found.append((marker, kwargs["suite"]))
    return found


def test_effective_suite_names_both_forms():
    source = (
        'register_cuda_ci(est_time=1, stage="base-b", runner_config="1-gpu-small")\n'
        'register_cpu_ci(5, "base-a-test-cpu")\n'
        'register_cuda_ci(est_time=1, suite="stage-b-test-1-gpu-small")\n'
    )
    assert _effective_suites(source) == [
        ("register_cuda_ci", "base-b-test-1-gpu-small"),
        ("register_cpu_ci", "base-a-test-cpu"),
        ("register_cuda_ci", "stage-b-test-1-gpu-small"),
    ]


KERNEL_TESTS = "test/registered/kernels/"
KERNEL_SUITE = "base-b-kernel-unit-test-1-gpu-large"


def test_kernel_tests_run_in_the_kernel_stage(series_tree):
    """Upstream's test README puts kernel correctness tests under test/registered/kernels/,
    run by the kernel stage: every such test of the series registers there (a second
    registration, as for another GPU's runner, may sit beside it)."""
    kernel_tests = {
        change.path: _effective_suites(change.after.decode())
        for change in series_changes(series_tree)
        if change.path.startswith(KERNEL_TESTS) and change.after is not None
    }
    assert kernel_tests, "the series adds no kernel test"
    outside = {p: s for p, s in kernel_tests.items() if ("register_cuda_ci", KERNEL_SUITE) not in s}
    assert not outside, outside


def test_registered_tests_name_per_commit_suites(series_tree):
    registrations = [
        (change.path, marker, suite)
        for change in series_changes(series_tree)
        if change.path.startswith(REGISTERED) and change.after is not None
        for marker, suite in _effective_suites(change.after.decode())
    ]
    assert {marker for _, marker, _ in registrations} == set(PER_COMMIT_SUITES)
    unknown = [r for r in registrations if r[2] not in PER_COMMIT_SUITES[r[1]]]
    assert not unknown, unknown


# Where upstream keeps tests of the kinds the series adds (test/registered/README.md and
# unit/README.md of sglang's tree, and its files; read in the fork bytedance-iaas/sglang):
# kernel tests under kernels/ops/<area>/; backend tests built on the attention test kit
# under attention/unittests/<method>/ (dense/test_triton.py, gdn/test_triton.py); the
# batch-invariant GEMM test in unit/batch_invariant_ops/; speculative decoding's unit
# tests in unit/spec/; other unit tests in unit/ mirroring srt/ (unit/server_args/,
# unit/layers/quantization/, unit/layers/attention/linear/kernels/ ...). Upstream's
# kit-based tests are all GPU tests; the series' CPU one is a unit test of
# triton_backend.py, in unit/layers/attention/ beside upstream's CPU attention tests.
UPSTREAM_FOLDERS = {
    "test/registered/kernels/ops/attention",
    "test/registered/kernels/ops/mamba",
    "test/registered/attention/unittests/dense",
    "test/registered/attention/unittests/gdn",
    "test/registered/unit/batch_invariant_ops",
    "test/registered/unit/spec",
    "test/registered/unit/server_args",
    "test/registered/unit/layers/quantization",
    "test/registered/unit/layers/attention",
    "test/registered/unit/layers/attention/linear",
}
ATTENTION_KIT = "sglang.test.kits.attention_unittest"
KIT_TESTS = "test/registered/attention/unittests/"


def _new_registered_tests(series_tree) -> dict[str, str]:
    return {
        change.path: change.after.decode()
        for change in series_changes(series_tree)
        if change.path.startswith(REGISTERED)
        and change.before is None
        and change.after is not None
        and change.path.rsplit("/", 1)[1].startswith("test_")
    }


def test_registered_tests_sit_in_upstreams_folders(series_tree):
    tests = _new_registered_tests(series_tree)
    assert tests, "the series adds no registered test"
    outside = sorted(p for p in tests if p.rsplit("/", 1)[0] not in UPSTREAM_FOLDERS)
    assert not outside, outside


def test_attention_kit_gpu_tests_sit_with_upstreams(series_tree):
    """A GPU test built on sglang's attention test kit sits where upstream's sit. (A CPU
    test that builds a backend with the kit is a unit test of that backend's module.)"""
    tests = _new_registered_tests(series_tree)
    kit_tests = {
        p
        for p, source in tests.items()
        if ATTENTION_KIT in source
        and any(m == "register_cuda_ci" for m, _ in _effective_suites(source))
    }
    assert kit_tests, "the series adds no GPU test on the attention kit"
    assert {p for p in kit_tests if not p.startswith(KIT_TESTS)} == set()
