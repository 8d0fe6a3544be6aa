#!/usr/bin/env bash
# Device command: the drift demo on the GPU (tiny and large models, and the large
# model with sglang's Triton attention), and the state trace through the real
# backends with the real commit. Carry .gpu (the sglang wheel + cp312 wheels).
# Everything lands in $OUT/gpu-demo.tar.gz; the tables also as $OUT/*.md.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/python SGLANG_CACHE_DIR=/tmp/sglang-cache PYTHONUNBUFFERED=1
export GDN_PARITY_CACHE=/tmp/gdn-parity-cache PYTHONWARNINGS=ignore
mkdir -p "$GDN_PARITY_CACHE/wheels" /tmp/gpu-out
cp .gpu/sglang-0.5.23-*.whl "$GDN_PARITY_CACHE/wheels/"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
} > /tmp/gpu-out/env.txt 2>&1
demo() {  # name, then demo arguments
  local name=$1 limit=$2 start=$SECONDS; shift 2
  timeout "$limit" python3 -m gdn_parity.cli demo --device cuda --jobs 3 --out "/tmp/gpu-out/$name" "$@" \
    > "/tmp/gpu-out/$name.log" 2>&1
  echo "$name: exit $?, $((SECONDS - start)) s" >> /tmp/gpu-out/env.txt
  cp "/tmp/gpu-out/$name/demo.md" "$OUT/$name.md" 2>/dev/null
}
demo tiny 150 --size tiny --tokens 96
python3 benchmark/gpu_state_trace.py "$GDN_PARITY_CACHE/variant-series" /tmp/gpu-out/state-trace \
  > /tmp/gpu-out/state-trace.log 2>&1
echo "state-trace: exit $?" >> /tmp/gpu-out/env.txt
tar czf "$OUT/gpu-demo.tar.gz" -C /tmp/gpu-out .
demo large 270 --size large --tokens 1000
demo large-triton-attention 90 --size large --tokens 256 --attention sglang-triton
cat /tmp/gpu-out/env.txt
tail -5 /tmp/gpu-out/*.log
tar czf "$OUT/gpu-demo.tar.gz" -C /tmp/gpu-out .
