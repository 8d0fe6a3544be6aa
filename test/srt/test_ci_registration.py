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
