#!/usr/bin/env bash
# Device command for the step-0 table: carry .gpu (sglang wheel + cp312 wheels).
# The trees are gdn-parity's own (git am of the series on the unzipped wheel).
set -euo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/python SGLANG_CACHE_DIR=/tmp/sglang-cache PYTHONUNBUFFERED=1
export GDN_PARITY_CACHE=/tmp/gdn-parity-cache
mkdir -p "$GDN_PARITY_CACHE/wheels" && cp .gpu/sglang-0.5.23-*.whl "$GDN_PARITY_CACHE/wheels/"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 benchmark/gpu/studies/step0_parity.py --out "$OUT" --patches 2
# The patch's own upstream-style test, run from the patched tree.
python3 - <<'PY' 2>&1 | tee "$OUT/upstream_test.log" || true
import unittest, importlib.util
from pathlib import Path
from gdn_parity.sandbox.bare_import import import_sglang_from
tree = Path("/tmp/gdn-parity-gpu/series")
import_sglang_from(tree)
path = next(tree.glob("test/registered/kernels/ops/attention/test_gdn_gate_*.py"))
spec = importlib.util.spec_from_file_location("upstream_test", path)
module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
result = unittest.TextTestRunner(verbosity=2).run(unittest.defaultTestLoader.loadTestsFromModule(module))
print("upstream test:", "PASSED" if result.wasSuccessful() else "FAILED", path.name)
PY
