#!/usr/bin/env bash
# Device command for the --gdn-verify-exact-parity table, benchmark and the
# series' CUDA tests. Carry .gpu (sglang wheel + cp312 wheels).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site SGLANG_CACHE_DIR=/tmp/sglang-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 - <<'PY' || exit 1
import sys; from pathlib import Path
sys.path.insert(0, "benchmark")
from gpu_tree import lay_out
lay_out(Path(".gpu/sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl"), sorted(Path("patches").glob("*.patch")), Path("/tmp/gdn-parity-gpu"))
PY
python3 benchmark/gpu_verify_parity.py --tree /tmp/gdn-parity-gpu/patched --out "$OUT" 2>&1 | tail -120
bash benchmark/run_gpu_upstream_tests.sh
