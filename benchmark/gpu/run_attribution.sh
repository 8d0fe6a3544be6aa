#!/usr/bin/env bash
# Device command: issue #10 parts 2 and 5 on the server stack. Carry .gpu (the sglang
# wheel + cp312 wheels). Arguments: the groups to run, in order (default: smoke):
#   smoke   tiny model, 8 tokens: the server stack, --attribute and cost run at all; and
#           the large model for 40 tokens, to size the long runs (~5 min)
#   bf16    large, 1000 tokens, bf16 SSM pool: the five server variants at batch 4 and
#           batch 1, and the isolating variants (one source live) at batch 4
#   fp32    the same five variants with an fp32 SSM pool, batch 4 and batch 1
#   cost    median decode/verify step per variant, N = 1, 4, 32, gamma 3, bf16 pool
#   costsplit  the same for the isolating variants: where the exact stack's time goes
#   contract   the claim's variants alone (0.5.23, exact-parity, deterministic-exact-parity),
#           large, batch 4, bf16 and fp32 pools, TOKENS tokens (1000): the contract on
#           another triton (TRITON=3.8)
#   dtypes  the claim's variants where the contract runs had not gone: batch 1 and 8 (bf16),
#           and fp16 activations (--dtype float16) with fp16, bf16 and fp32 SSM pools at
#           batch 4; TOKENS tokens (1000); all five side by side
#   gemms   only-gemm (everything exact but batch-invariant mode: default GEMMs, the gated
#           norm's row blocking from the row count; the cheap stack of the cost split) at batch 1, 4 and 8 (bf16) and 4 (fp16 activations), TOKENS tokens
#   rowwise the row-wise control (no sglang serving modules needed): torch attention and
#           sglang's Triton attention kernels, three variants each, bf16 pool
#   fp8kv   issue #25: an FP8 E4M3 KV cache (--kv-cache-dtype fp8_e4m3; no scales, as sglang
#           for a checkpoint without them) in every variant: deterministic-exact-parity (the
#           claim) and exact-parity (the flag alone: the negative control), large, bf16 SSM
#           pool, TOKENS tokens (1000), batch 1 and 4; the two demos side by side, --jobs 2
#           each, FP8KV_LIMIT s each (240; about 3 minutes expected, as the gemms group's)
# The demos of consecutive groups run side by side (--jobs 5 each: the server stack is
# host-bound); cost waits for them, to time alone.
# Time limits (s): DEMO_LIMIT per demo (540), COST_LIMIT for the cost group (540).
# Tables land in $OUT/<group>-<run>.md; everything in $OUT/attribution.tar.gz.
set -uo pipefail
DEMO_LIMIT=${DEMO_LIMIT:-540} COST_LIMIT=${COST_LIMIT:-540}
source benchmark/gpu/device_setup.sh /tmp/attr-out
SERVER=0.5.23,beta-aligned,exact-parity,deterministic,deterministic-exact-parity
ISOLATE=exact-stack,only-gemm,only-attention,only-conv,only-gdn
LARGE=(--device cuda --size large --tokens 1000 --gammas 1,4 --natural-gamma 3
  --accept-rates 0.9 --attribute --stop-at-divergence --jobs 5)
demo() {  # name, time limit, then demo arguments; in the background
  local name=$1 limit=$2; shift 2
  ( start=$SECONDS
    timeout "$limit" python3 -m gdn_parity.cli demo --out "/tmp/attr-out/$name" "$@" \
      > "/tmp/attr-out/$name.log" 2>&1
    echo "$name: exit $?, $((SECONDS - start)) s" >> /tmp/attr-out/env.txt
    cp "/tmp/attr-out/$name/demo.md" "$OUT/$name.md" 2>/dev/null ) &
}
for group in ${*:-smoke}; do
  case $group in
    smoke)
      demo smoke-demo 200 --device cuda --size tiny --tokens 8 --gammas 1 --accept-rates 0.9 \
        --batch 4 --attribute --variants 0.5.23,deterministic-exact-parity,only-conv --jobs 3
      demo smoke-large 200 --device cuda --size large --tokens 40 --gammas 1 --natural-gamma 3 \
        --accept-rates 0.9 --batch 4 --attribute --variants 0.5.23,deterministic-exact-parity --jobs 2
      wait
      timeout 150 python3 -m gdn_parity.cli cost --size tiny --batch 1,4 --replays 5 \
        --variants 0.5.23,deterministic-exact-parity --out /tmp/attr-out/smoke-cost \
        > /tmp/attr-out/smoke-cost.log 2>&1
      echo "smoke-cost: exit $?" >> /tmp/attr-out/env.txt
      cp /tmp/attr-out/smoke-cost/cost.md "$OUT/smoke-cost.md" 2>/dev/null ;;
    bf16)
      demo bf16-batch4 $DEMO_LIMIT "${LARGE[@]}" --batch 4 --variants $SERVER
      demo bf16-batch1 $DEMO_LIMIT "${LARGE[@]}" --batch 1 --variants $SERVER
      demo bf16-isolate $DEMO_LIMIT "${LARGE[@]}" --batch 4 --variants $ISOLATE ;;
    contract)
      C=0.5.23,exact-parity,deterministic-exact-parity
      demo contract-bf16 $DEMO_LIMIT "${LARGE[@]}" --tokens ${TOKENS:-1000} --batch 4 --variants $C
      demo contract-fp32 $DEMO_LIMIT "${LARGE[@]}" --tokens ${TOKENS:-1000} --ssm-dtype float32 \
        --batch 4 --variants $C ;;
    dtypes)
      C=0.5.23,exact-parity,deterministic-exact-parity
      T=(--tokens ${TOKENS:-1000} --variants $C)
      demo dtypes-bf16-batch1 $DEMO_LIMIT "${LARGE[@]}" "${T[@]}" --batch 1
      demo dtypes-bf16-batch8 $DEMO_LIMIT "${LARGE[@]}" "${T[@]}" --batch 8
      for pool in float16 bfloat16 float32; do
        demo "dtypes-fp16-act-$pool-pool" $DEMO_LIMIT "${LARGE[@]}" "${T[@]}" --batch 4 \
          --dtype float16 --ssm-dtype $pool
      done ;;
    gemms)
      for b in 1 4 8; do
        demo gemms-bf16-batch$b $DEMO_LIMIT "${LARGE[@]}" --tokens ${TOKENS:-1000} --batch $b \
          --variants only-gemm
      done
      demo gemms-fp16-batch4 $DEMO_LIMIT "${LARGE[@]}" --tokens ${TOKENS:-1000} --batch 4 \
        --dtype float16 --variants only-gemm ;;
    fp32)
      demo fp32-batch4 $DEMO_LIMIT "${LARGE[@]}" --ssm-dtype float32 --batch 4 --variants $SERVER
      demo fp32-batch1 $DEMO_LIMIT "${LARGE[@]}" --ssm-dtype float32 --batch 1 --variants $SERVER ;;
    fp8kv)
      for b in 1 4; do
        demo fp8kv-batch$b "${FP8KV_LIMIT:-240}" "${LARGE[@]}" --tokens "${TOKENS:-1000}" \
          --batch $b --ssm-dtype bfloat16 --kv-cache-dtype fp8_e4m3 --jobs 2 \
          --variants exact-parity,deterministic-exact-parity
      done ;;
    rowwise)
      RW=(--device cuda --stack rowwise --size large --tokens 1000 --gammas 1,4
        --natural-gamma 3 --accept-rates 0.9 --attribute --stop-at-divergence --jobs 3
        --variants 0.5.23,beta-aligned,exact-parity)
      demo rowwise-torch 540 "${RW[@]}"
      demo rowwise-triton 540 "${RW[@]}" --attention sglang-triton
      wait ;;
    cost)
      wait  # alone on the machine
      timeout $COST_LIMIT python3 -m gdn_parity.cli cost --batch 1,4,32 --gamma 3 \
        --out /tmp/attr-out/cost-bf16 > /tmp/attr-out/cost-bf16.log 2>&1
      echo "cost-bf16: exit $?" >> /tmp/attr-out/env.txt
      cp /tmp/attr-out/cost-bf16/cost.md "$OUT/cost-bf16.md" 2>/dev/null ;;
    costsplit)
      wait
      timeout $COST_LIMIT python3 -m gdn_parity.cli cost --batch 1,4,32 --gamma 3 \
        --variants beta-aligned,${ISOLATE} --out /tmp/attr-out/cost-split \
        > /tmp/attr-out/cost-split.log 2>&1
      echo "cost-split: exit $?" >> /tmp/attr-out/env.txt
      cp /tmp/attr-out/cost-split/cost.md "$OUT/cost-split.md" 2>/dev/null ;;
  esac
done
wait
cat /tmp/attr-out/env.txt
tail -n 3 /tmp/attr-out/*.log
tar czf "$OUT/attribution.tar.gz" -C /tmp/attr-out .
