#!/usr/bin/env bash
# Device command for the --gdn-verify-exact-parity table, benchmark and the
# series' CUDA tests. Carry .gpu (sglang wheel + cp312 wheels).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/python SGLANG_CACHE_DIR=/tmp/sglang-cache PYTHONUNBUFFERED=1
export GDN_PARITY_CACHE=/tmp/gdn-parity-cache
mkdir -p "$GDN_PARITY_CACHE/wheels" && cp .gpu/sglang-0.5.23-*.whl "$GDN_PARITY_CACHE/wheels/"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m gdn_parity.cli tree /tmp/gdn-parity-gpu/series || exit 1
python3 benchmark/gpu/verify_parity.py --tree /tmp/gdn-parity-gpu/series --out "$OUT" 2>&1 | tail -120
bash benchmark/gpu/run_upstream_tests.sh
