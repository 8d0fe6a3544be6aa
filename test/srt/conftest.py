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
