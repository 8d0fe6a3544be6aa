#!/usr/bin/env bash
# Run on the GPU machine (after install.sh and trees.sh): real `sglang.launch_server` starts
# that --gdn-verify-exact-parity refuses, all at once (each fails in server-argument
# resolution, before it takes GPU memory). For each: the exit status, the seconds it took,
# and whether the server's last error line names the fix. Writes OUTDIR/refusals.md.
# Usage: bash benchmark/gpu/server/refusals.sh OUTDIR MODEL_DIR DRAFT_DIR
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=$1 model=$2 draft=$3
source benchmark/gpu/server/env.sh
tree=${TREES:-/tmp/srv-trees}/series
mkdir -p "$out/refusals"
# A model that is no GDN hybrid: Qwen3 (dense) with the draft's sizes, dummy weights.
llama=$out/refusals/qwen3-dense
mkdir -p "$llama"
python3 -c "import json, sys
c = json.load(open(sys.argv[1] + '/config.json'))
c.update(architectures=['Qwen3ForCausalLM'], num_hidden_layers=2)
for k in ('block_size', 'num_target_layers', 'dflash_config', 'markov_rank', 'markov_head_type'):
    c.pop(k, None)
json.dump(c, open(sys.argv[2] + '/config.json', 'w'))" "$draft" "$llama"
common=(--skip-tokenizer-init --load-format dummy --attention-backend triton
  --sampling-backend pytorch --enable-deterministic-inference --gdn-verify-exact-parity
  --host 127.0.0.1)
spec=(--speculative-algorithm DSPARK --speculative-draft-model-path "$draft"
  --speculative-draft-load-format dummy --speculative-dspark-block-size 1)
# name | fix the error must name | env | arguments
cases=(
  "not-gdn|requires a hybrid GDN model||--model-path $llama --port 31001"
  "decode-backend|--linear-attn-decode-backend triton||--model-path $model --linear-attn-decode-backend flashinfer --port 31002"
  "ragged-verify|SGLANG_RAGGED_VERIFY_MODE=static|SGLANG_RAGGED_VERIFY_MODE=compact|--model-path $model ${spec[*]} --port 31003"
  # no_buffer without overlap: else sglang refuses ReplaySSM's cache strategy itself, first.
  "replayssm|Remove --enable-linear-replayssm||--model-path $model --enable-linear-replayssm --mamba-radix-cache-strategy no_buffer --disable-overlap-schedule --port 31004"
  "mixed-chunk|Remove --enable-mixed-chunk||--model-path $model --enable-mixed-chunk --mamba-radix-cache-strategy no_buffer --disable-overlap-schedule --port 31005"
)
pids=()
for c in "${cases[@]}"; do
  IFS='|' read -r name fix env args <<< "$c"
  (
    start=$SECONDS
    env PYTHONPATH="$tree/python:$PYTHONPATH" $env timeout 300 \
      python3 -m sglang.launch_server "${common[@]}" $args > "$out/refusals/$name.log" 2>&1
    echo "$? $((SECONDS - start))" > "$out/refusals/$name.status"
  ) &
  pids+=($!)
done
wait "${pids[@]}"
{
  echo "| case | exit status | seconds | last error line | names the fix |"
  echo "|---|---|---|---|---|"
  for c in "${cases[@]}"; do
    IFS='|' read -r name fix env args <<< "$c"
    read -r rc secs < "$out/refusals/$name.status"
    line=$(grep -E 'Error|error' "$out/refusals/$name.log" | tail -n1 | cut -c1-300)
    named=no
    grep -qF -- "$fix" "$out/refusals/$name.log" && named=yes
    echo "| $name | $rc | $secs | \`${line//|/\\|}\` | $named ($fix) |"
  done
} | tee "$out/refusals.md"
