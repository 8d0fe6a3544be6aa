#!/usr/bin/env bash
# Device command: the series' upstream-style CUDA tests, run from the patched
# tree. Carry .gpu (sglang wheel + cp312 wheels). run_verify.sh ends with it.
set -uo pipefail
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}/tmp/site:$PWD/python SGLANG_CACHE_DIR=/tmp/sglang-cache PYTHONUNBUFFERED=1
export GDN_PARITY_CACHE=/tmp/gdn-parity-cache
if [ ! -d /tmp/gdn-parity-gpu/series ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || exit 1
  mkdir -p "$GDN_PARITY_CACHE/wheels" && cp .gpu/sglang-0.5.23-*.whl "$GDN_PARITY_CACHE/wheels/"
  python3 -m gdn_parity.cli tree /tmp/gdn-parity-gpu/series || exit 1
fi
# The series' own upstream-style CUDA tests, from the patched tree.
python3 - <<'PY' 2>&1 | tee "${TESTS_OUT:-$OUT}/upstream_tests.log" | tail -30
import importlib.util, os, sys, unittest
from pathlib import Path
from gdn_parity.sandbox.sglang_tree import use_tree
import torch, triton
print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)
tree = Path("/tmp/gdn-parity-gpu/series")
# 0007's test builds TritonAttnBackend from the attention kit's model runner, whose
# modules import sgl_kernel: stubbed where the image lacks it, as for the demo.
use_tree(tree, "cuda")
# TritonAttnBackend.__init__ asks sgl_kernel whether the GPU supports PDL; the stub
# would raise. sgl_kernel.utils.is_arch_support_pdl answers compute capability >= 9.
import sgl_kernel.utils
from gdn_parity.sandbox.sgl_kernel_stub import _StubModule
if isinstance(sgl_kernel.utils, _StubModule):
    sgl_kernel.utils.is_arch_support_pdl = lambda: torch.cuda.get_device_capability()[0] >= 9
# sglang.test.test_utils imports the whole serving stack (IPython, datasets, ...),
# which the device image lacks; CustomTestCase only adds retries to TestCase.
import types
shim = types.ModuleType("sglang.test.test_utils")
shim.CustomTestCase = unittest.TestCase
sys.modules["sglang.test.test_utils"] = shim
suite = unittest.TestSuite()
# Every CUDA test the series registers (the 0.5.23 wheel has no test/, so every test under
# test/registered is the series'): those that call register_cuda_ci.
paths = sorted(
    p for p in tree.glob("test/registered/**/test_*.py") if "register_cuda_ci(" in p.read_text()
)
print("CUDA tests:", *(p.name for p in paths))
# TESTS_MATCH=a,b keeps the test files whose name contains one of the words.
words = [w for w in os.environ.get("TESTS_MATCH", "").split(",") if w]
paths = [p for p in paths if not words or any(w in p.name for w in words)]
for path in paths:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
    suite.addTests(unittest.defaultTestLoader.loadTestsFromModule(module))
result = unittest.TextTestRunner(verbosity=2).run(suite)
print("upstream tests:", "PASSED" if result.wasSuccessful() else "FAILED", result.testsRun, "run")
PY
