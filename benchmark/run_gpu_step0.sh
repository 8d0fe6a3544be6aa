#!/usr/bin/env bash
# Device command for the step-0 table: carry .gpu (sglang wheel + cp312 wheels).
set -euo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl
export PYTHONPATH=/tmp/site SGLANG_CACHE_DIR=/tmp/sglang-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 benchmark/gpu_step0_parity.py --wheel .gpu/sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl --out "$OUT" patches/000[12]-*.patch
# The patch's own upstream-style test, run from the patched tree.
python3 - <<'PY' 2>&1 | tee "$OUT/upstream_test.log" || true
import sys, unittest, importlib.util
sys.path.insert(0, "benchmark")
from gpu_tree import import_sglang_from
from pathlib import Path
tree = Path("/tmp/gdn-parity-gpu/patched")
import_sglang_from(tree)
path = next(tree.glob("test/registered/unit/layers/attention/linear/kernels/test_gdn_gate_*.py"))
spec = importlib.util.spec_from_file_location("upstream_test", path)
module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
result = unittest.TextTestRunner(verbosity=2).run(unittest.defaultTestLoader.loadTestsFromModule(module))
print("upstream test:", "PASSED" if result.wasSuccessful() else "FAILED", path.name)
PY
