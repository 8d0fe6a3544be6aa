#!/usr/bin/env bash
# Device command: the drift demo on the GPU: the tiny and the large model, and the
# large model with sglang's Triton attention kernels. Carry .gpu (the sglang wheel
# + cp312 wheels). Arguments: the runs to make (default: all three).
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
RUNS=${*:-tiny large large-triton-attention}  # which runs: all by default
demo() {  # name, time limit, then demo arguments
  local name=$1 limit=$2 start=$SECONDS; shift 2
  [[ " $RUNS " == *" $name "* ]] || return 0
  timeout "$limit" python3 -m gdn_parity.cli demo --device cuda --jobs 3 --out "/tmp/gpu-out/$name" "$@" \
    > "/tmp/gpu-out/$name.log" 2>&1
  echo "$name: exit $?, $((SECONDS - start)) s" >> /tmp/gpu-out/env.txt
  cp "/tmp/gpu-out/$name/demo.md" "$OUT/$name.md" 2>/dev/null
}
demo tiny 150 --size tiny --tokens 96
demo large 420 --size large --tokens 1000 --gammas 1,4 --accept-rates 0.9
demo large-triton-attention 100 --size large --tokens 200 --gammas 1 --accept-rates 0.9 \
  --attention sglang-triton --variants beta-aligned,exact-parity
cat /tmp/gpu-out/env.txt
tar czf "$OUT/gpu-demo.tar.gz" -C /tmp/gpu-out .
