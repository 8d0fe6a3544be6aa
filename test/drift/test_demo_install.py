"""The README's first command installs ``.[demo]``, which has no transformers: the row-wise
stack's sglang modules must import without it.

The test bed has transformers (the server stack needs it), so each check runs in a fresh
interpreter in which importing transformers fails, as it does in the demo's install. A patch
that makes a kernel module the row-wise stack imports reach sglang's model configs (patch
0009 once read batch-invariant mode in ``TritonGDNKernel``, whose import of
``batch_invariant_ops`` pulls in the configs) fails here.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

_WITHOUT_TRANSFORMERS = """
import sys
sys.modules["transformers"] = None  # import transformers fails, as without it
from pathlib import Path
from gdn_parity.sandbox.sglang_tree import use_tree
use_tree(Path(sys.argv[1]), "cpu")
from gdn_parity.drift.model.kernels import load_kernels
kernels = load_kernels()
print(type(kernels.gdn).__name__, kernels.has_exact_parity)
"""


@pytest.mark.needs_tree
def test_the_row_wise_stack_imports_without_transformers(series_tree):
    proc = subprocess.run(
        [sys.executable, "-c", _WITHOUT_TRANSFORMERS, str(series_tree)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["TritonGDNKernel", "True"]


def test_the_check_sees_a_missing_transformers():
    """Control: in that interpreter, what imports transformers fails."""
    probe = _WITHOUT_TRANSFORMERS.split("from pathlib")[0] + "import transformers\n"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert proc.returncode != 0 and "import of transformers halted" in proc.stderr
