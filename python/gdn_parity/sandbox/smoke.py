"""``gdn-parity smoke``: import the patched GDN modules from a tree, in a fresh interpreter.

The modules are imported through a bare ``sglang`` package (see ``bare_import``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gdn_parity.errors import GdnParityError
from gdn_parity.logs import keep_log, last_line

# The GDN kernel modules the series patches (some of the files it changes); importing them
# shows that the series applies and these import.
PATCHED_MODULES = (
    "sglang.kernels.ops.attention.linear.gdn_gate",
    "sglang.kernels.ops.attention.fla.fused_recurrent",
    "sglang.kernels.ops.attention.linear.fused_sigmoid_gating_recurrent",
    "sglang.kernels.ops.attention.linear.fused_gdn_gating",
    "sglang.kernels.ops.attention.linear.fused_recurrent_linear_replayssm",
    "sglang.kernels.ops.attention.linear.gdn_replayssm_spec_decode",
)

_PROBE = """
import importlib, sys
from pathlib import Path
from gdn_parity.sandbox.bare_import import import_sglang_from
import_sglang_from(Path(sys.argv[1]))
for name in sys.argv[2:]:
    module = importlib.import_module(name)
    print(f"  {name}\\n    <- {module.__file__}")
"""


def smoke(tree: Path) -> str:
    """Import the GDN kernel modules the series patches from ``tree/python``; return the
    report."""
    python_dir = tree / "python"
    env = dict(os.environ)
    env.update(
        {
            "TRITON_INTERPRET": "1",
            "SGLANG_CACHE_DIR": str(tree / ".sglang-cache"),
        }
    )
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", _PROBE, str(tree), *PATCHED_MODULES],
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        log = keep_log("smoke", proc.stdout + proc.stderr)
        raise GdnParityError(
            f"importing the patched modules from {tree} failed: {last_line(proc.stderr)} "
            f"(its output: {log})"
        )
    outside = [
        line for line in proc.stdout.splitlines() if "<-" in line and str(python_dir) not in line
    ]
    if outside:
        raise GdnParityError(f"modules came from outside the tree: {outside}")
    return proc.stdout
