"""The torch fix: ``torch.cpu.device(index)`` exists (sglang's fla input_guard enters it)."""

from __future__ import annotations

import subprocess
import sys

import torch


def test_cpu_device_context_exists():
    with torch.cpu.device(0):
        assert torch.ones(1).device.type == "cpu"


def test_without_the_fix_torch_has_no_cpu_device_context():
    """Still needed: a fresh interpreter's torch.cpu has no ``device``."""
    proc = subprocess.run(
        [sys.executable, "-c", "import torch; print(hasattr(torch.cpu, 'device'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stdout.strip() == "False"
