"""The CPU test bed: the patched sglang from a materialised tree, kernels under the interpreter.

The tree (base + series) is materialised once per test session by the
``sglang_tree`` fixture, and its ``python/`` directory then goes first on
``sys.path``, so ``import sglang`` imports the patched package. Triton kernels
run under ``TRITON_INTERPRET=1`` with the fixes of ``gdn_parity.sandbox``.

Markers: ``needs_tree`` (the pinned wheel and a materialised tree: the network
on the first run, the cache after it) and ``slow`` (more than a few seconds).
``pytest -m "not needs_tree and not slow"`` runs the pure tests offline (about two minutes on 2
cores).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from gdn_parity.queue.cache import cache_dir

# Before anything imports triton or sglang. sglang's JIT cache goes with the rest of the
# cache (GDN_PARITY_CACHE), not in a folder that other users of /tmp share.
os.environ["TRITON_INTERPRET"] = "1"
os.environ.setdefault("SGLANG_CACHE_DIR", str(cache_dir() / "sglang-cache"))

import pytest  # noqa: E402

from gdn_parity.queue.series import Series, load_series  # noqa: E402
from gdn_parity.queue.tree import materialise_tree  # noqa: E402
from gdn_parity.sandbox import (  # noqa: E402
    torch_cpu_device,
    torchvision_shim,  # noqa: E402
    triton_interpreter_fixes,
)
from helpers.cli import scratch_cache_in  # noqa: E402

triton_interpreter_fixes.install()
torch_cpu_device.install()
torchvision_shim.install()
# The test bed's own tree, apart from a developer's default tree (which may hold
# unexported work); subprocesses of the tests inherit it.
os.environ["GDN_PARITY_TREE"] = str(cache_dir() / "testbed-tree")
# The cache is the user's (GDN_PARITY_CACHE, else ~/.cache/gdn-parity): the tests share its
# wheel, base and trees. Its logs/ is theirs alone: a test that makes something fail runs
# on a scratch cache (``scratch_cache``, ``helpers.cli.scratch_cache_in``).
USER_LOGS = cache_dir() / "logs"

# Fixtures that need the pinned wheel or a materialised tree mark their tests needs_tree;
# those that run the harness's model in a worker or a server mark them slow too.
TREE_FIXTURES = {
    "sglang_tree",
    "series_tree",
    "legacy_run",
    "legacy_servers",
    "installed_site",
    "checkout",
    "changes",
}
SLOW_FIXTURES = {"legacy_run", "legacy_servers"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = set(item.fixturenames)
        if names & TREE_FIXTURES:
            item.add_marker(pytest.mark.needs_tree)
        if names & SLOW_FIXTURES:
            item.add_marker(pytest.mark.slow)


def _user_logs() -> set[str]:
    return {p.name for p in USER_LOGS.iterdir()} if USER_LOGS.is_dir() else set()


@pytest.fixture(autouse=True)
def _no_log_in_the_users_cache():
    """A test leaves no log in the user's cache. Before, each run left three: two in-process
    failures (a patch that does not apply, a checkout's git am that a hook refuses), and the
    interrupted demo's worker, whose thread the CLI exited under (``run_workers``)."""
    before = _user_logs()
    yield
    assert _user_logs() <= before, (
        f"the test wrote into {USER_LOGS}: {_user_logs() - before} (or a gdn-parity command "
        "run beside the tests on the same cache did: run the tests alone, or with "
        "GDN_PARITY_CACHE set to a cache of their own)"
    )


@pytest.fixture
def scratch_cache(series, tmp_path, monkeypatch) -> Path:
    """A cache of the test's own (GDN_PARITY_CACHE, for it and its subprocesses) that shares
    the session cache's base: where what the test makes fail writes its log."""
    cache = scratch_cache_in(series, tmp_path)
    monkeypatch.setenv("GDN_PARITY_CACHE", str(cache))
    return cache


@pytest.fixture(scope="session")
def series() -> Series:
    return load_series()


@pytest.fixture(scope="session")
def series_tree(series) -> Path:
    """The test bed's tree of base + series (materialised once per session)."""
    return materialise_tree(series)


@pytest.fixture(scope="session")
def sglang_tree(series_tree) -> Path:
    """The materialised tree; its patched sglang is importable from here on."""
    python_dir = str(series_tree / "python")
    if python_dir not in sys.path:
        sys.path.insert(0, python_dir)
    import sglang

    assert Path(sglang.__file__).is_relative_to(series_tree), sglang.__file__
    return series_tree


CLI = Callable[..., subprocess.CompletedProcess]


@pytest.fixture(scope="session")
def run_cli() -> CLI:
    """``run_cli(*args, env=None, timeout=600, cwd=None)``: the ``gdn-parity`` command, as a
    user runs it (in ``cwd``, else the tests' directory)."""

    def run(
        *args: str,
        env: dict[str, str] | None = None,
        timeout: float = 600,
        cwd: Path | None = None,
    ):
        return subprocess.run(
            [sys.executable, "-m", "gdn_parity.cli", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            cwd=cwd,
        )

    return run


@pytest.fixture(scope="session")
def tiny_model(sglang_tree):
    """The harness's tiny model on the patched tree's kernels (each user prefills its own run)."""
    from gdn_parity.drift.model.hybrid import HybridModel

    return HybridModel.build("tiny", "cpu", max_len=64)


LEGACY_TOKENS = 32


@pytest.fixture(scope="session")
def legacy_run(series, tmp_path_factory):
    """The drift harness on sglang 0.5.23's kernels, in a worker of its own, with traces.

    The 0.5.23 tree cannot be imported beside the patched one, so this is the
    demo's own worker process; its result is the ``VariantResult`` it writes.
    """
    from gdn_parity.debug.issue35150 import INPUT_IDS
    from gdn_parity.drift.run.modes import Mode, ModeKind
    from gdn_parity.drift.run.results import VariantResult
    from gdn_parity.drift.run.variants import variant_named, variant_tree
    from gdn_parity.drift.run.worker import Job

    out = tmp_path_factory.mktemp("legacy-run")
    job = Job(
        variant="0.5.23",
        tree=str(variant_tree(series, variant_named("0.5.23"))),
        exact_parity=False,
        size="tiny",
        device="cpu",
        prompt=list(INPUT_IDS),
        tokens=LEGACY_TOKENS,
        modes=[Mode(ModeKind.FORCED_REJECT, 1), Mode(ModeKind.NATURAL, 2, 0.7)],
        trace_dir=str(out / "trace"),
        out=str(out / "result.json"),
    )
    (out / "job.json").write_text(job.to_json())
    subprocess.run(
        [sys.executable, "-m", "gdn_parity.drift.run.worker", str(out / "job.json")],
        check=True,
        capture_output=True,
    )
    return VariantResult.from_json((out / "result.json").read_text())
