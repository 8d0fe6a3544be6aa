#!/usr/bin/env bash
# Device command: the drift demo on the GPU: the tiny and the large model, and the
# large model with sglang's Triton attention kernels. Carry .gpu (the sglang wheel
# + cp312 wheels). Arguments: the runs to make (default: all three).
# Everything lands in $OUT/gpu-demo.tar.gz; the tables also as $OUT/*.md.
set -uo pipefail
source benchmark/gpu/device_setup.sh /tmp/gpu-out
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
