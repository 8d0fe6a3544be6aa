"""The CPU test bed: the patched sglang from a materialised tree, kernels under the interpreter.

The tree (base + series) is materialised once per test session, and its
``python/`` directory goes first on ``sys.path``, so ``import sglang`` imports
the patched package. Triton kernels run under ``TRITON_INTERPRET=1`` with the
fixes of ``gdn_parity.interpreter``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

# Before anything imports triton or sglang.
os.environ["TRITON_INTERPRET"] = "1"
os.environ.setdefault(
    "SGLANG_CACHE_DIR", str(Path(tempfile.gettempdir()) / "gdn-parity-sglang-cache")
)

import pytest  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))

import torchvision_shim  # noqa: E402
from gdn_parity import interpreter  # noqa: E402
from gdn_parity.base import cache_dir  # noqa: E402
from gdn_parity.series import load_series  # noqa: E402
from gdn_parity.tree import materialise_tree  # noqa: E402

interpreter.install()
torchvision_shim.install()
# The test bed's own tree, apart from a developer's default tree (which may hold
# unexported work); subprocesses of the tests inherit it.
os.environ["GDN_PARITY_TREE"] = str(cache_dir() / "testbed-tree")


@pytest.fixture(scope="session")
def series():
    return load_series()


@pytest.fixture(scope="session")
def sglang_tree(series) -> Path:
    """The materialised tree; its patched sglang is importable from here on."""
    tree = materialise_tree(series)
    python_dir = str(tree / "python")
    if python_dir not in sys.path:
        sys.path.insert(0, python_dir)
    import sglang

    assert Path(sglang.__file__).is_relative_to(tree), sglang.__file__
    return tree


LEGACY_TOKENS = 32


@pytest.fixture(scope="session")
def legacy_run(series, tmp_path_factory) -> dict:
    """The drift harness on sglang 0.5.23's kernels, in a worker of its own, with traces.

    The 0.5.23 tree cannot be imported beside the patched one, so this is the
    demo's own worker process; its result is the JSON it writes.
    """
    import json
    import subprocess

    from gdn_parity.drift.modes import Mode
    from gdn_parity.drift.variants import variant_named, variant_tree
    from gdn_parity.drift.worker import Job
    from gdn_parity.issue35150 import INPUT_IDS

    out = tmp_path_factory.mktemp("legacy-run")
    job = Job(
        variant="0.5.23",
        tree=str(variant_tree(series, variant_named("0.5.23"))),
        exact_parity=False,
        size="tiny",
        device="cpu",
        prompt=list(INPUT_IDS),
        tokens=LEGACY_TOKENS,
        modes=[Mode("forced-reject", 1), Mode("natural", 2, 0.7)],
        trace_dir=str(out / "trace"),
        out=str(out / "result.json"),
    )
    (out / "job.json").write_text(job.to_json())
    subprocess.run(
        [sys.executable, "-m", "gdn_parity.drift.worker", str(out / "job.json")],
        check=True,
        capture_output=True,
    )
    return json.loads((out / "result.json").read_text())
