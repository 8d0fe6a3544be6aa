"""Run one of the series' registered upstream test files in a process of its own.

Upstream's CI runs each registered file in its own interpreter, and some of them
(sglang's attention test kit) change process-wide state when imported: the kit
pins the parallel topology for the rest of the process. So the test bed runs each
file in a child interpreter, as the bed runs sglang (the patched tree first on
``sys.path``, kernels under the Triton interpreter with the sandbox's fixes), and
reads back what unittest reports. ``python registered.py TREE PATH [SETTINGS]``
is the child; SETTINGS, a JSON object ``{"TestCase": {"ATTR": value}}``, replaces
class attributes first (lists become tuples), so a CUDA test can run at CPU shapes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

RESULT_PREFIX = "registered-result: "


@dataclass(frozen=True)
class RegisteredRun:
    """What unittest reported for one file (test ids), and the child's output."""

    ran: int
    failed: list[str]
    skipped: list[str]
    output: str


def run_registered(
    tree: Path, path: str, settings: dict[str, dict] | None = None, timeout: float = 900
) -> RegisteredRun:
    """Run the registered test file ``path`` of ``tree`` in a child interpreter."""
    proc = subprocess.run(
        [sys.executable, __file__, str(tree), path, json.dumps(settings or {})],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    output = proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    assert lines, f"the child reported nothing (exit {proc.returncode}):\n{output[-4000:]}"
    result = json.loads(lines[-1][len(RESULT_PREFIX) :])
    return RegisteredRun(result["ran"], result["failed"], result["skipped"], output)


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _main(tree: Path, path: str, settings: dict[str, dict]) -> None:
    import importlib.util
    import os
    import unittest

    os.environ["TRITON_INTERPRET"] = "1"  # before triton is first imported
    from gdn_parity.sandbox import torch_cpu_device, torchvision_shim, triton_interpreter_fixes

    triton_interpreter_fixes.install()
    torch_cpu_device.install()
    torchvision_shim.install()
    sys.path.insert(0, str(tree / "python"))
    spec = importlib.util.spec_from_file_location(Path(path).stem, tree / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for case_name, attributes in settings.items():
        for name, value in attributes.items():
            setattr(getattr(module, case_name), name, _tuples(value))
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    result = unittest.TextTestRunner(stream=sys.stderr, verbosity=2).run(suite)
    report = {
        "ran": result.testsRun,
        "failed": [test.id() for test, _ in result.failures + result.errors],
        "skipped": [test.id() for test, _ in result.skipped],
    }
    print(RESULT_PREFIX + json.dumps(report), flush=True)


if __name__ == "__main__":
    _main(Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3]))
