#!/usr/bin/env bash
# Device command: the series' upstream-style CUDA tests, run from the patched
# tree. Carry .gpu (sglang wheel + cp312 wheels). run_gpu_verify.sh ends with it.
set -uo pipefail
if [ ! -d /tmp/gdn-parity-gpu/patched ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || exit 1
  python3 - <<'PY' || exit 1
import sys; from pathlib import Path
sys.path.insert(0, "benchmark")
from gpu_tree import lay_out
lay_out(Path(".gpu/sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl"), sorted(Path("patches").glob("*.patch")), Path("/tmp/gdn-parity-gpu"))
PY
fi
export PYTHONPATH=/tmp/site SGLANG_CACHE_DIR=/tmp/sglang-cache PYTHONUNBUFFERED=1
# The series' own upstream-style CUDA tests, from the patched tree.
python3 - <<'PY' 2>&1 | tee "$OUT/upstream_tests.log" | tail -30
import sys, unittest, importlib.util
sys.path.insert(0, "benchmark")
from gpu_tree import import_sglang_from
from pathlib import Path
tree = Path("/tmp/gdn-parity-gpu/patched")
import_sglang_from(tree)
# sglang.test.test_utils imports the whole serving stack (IPython, datasets, ...),
# which the device image lacks; CustomTestCase only adds retries to TestCase.
import types
shim = types.ModuleType("sglang.test.test_utils")
shim.CustomTestCase = unittest.TestCase
sys.modules["sglang.test.test_utils"] = shim
suite = unittest.TestSuite()
for path in sorted(tree.glob("test/registered/unit/layers/attention/linear/kernels/test_gdn_*.py")):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
    suite.addTests(unittest.defaultTestLoader.loadTestsFromModule(module))
result = unittest.TextTestRunner(verbosity=2).run(suite)
print("upstream tests:", "PASSED" if result.wasSuccessful() else "FAILED", result.testsRun, "run")
PY
