#!/usr/bin/env bash
# Run on the GPU machine through start.sh, after install.sh and trees.sh: issue 45's real
# server runs, one after another, each into its own folder of OUTDIR, with a line per step in
# OUTDIR/campaign.log and its output in OUTDIR/STEP.out. poll.sh waits on it. A step that
# fails is logged and the next one runs.
# Steps (default: all, in this order): refusals reporter graphs-bf16 graphs-bf16-triton
# graphs-fp32 graphs-fp8kv gemm dram-bytes cost. dram-bytes is issue 47's bytes goal
# (verify_dram_bytes.py under ncu, 16K context, 2 and 4 rows). The identity steps' model directory (IDENTITY_MODEL) is
# written before the first step that needs it; cost and cost-slice write the 64-layer 27b's
# configs (no weights: --load-format dummy). cost-slice (plans/cost-27b-slice.toml, not in the default list) is
# three starts at one accept length, about 15 minutes: the first slice for a short lease.
# cost (plans/cost-27b.toml) takes about 2.5 hours on an H200 (2 to 4): 14 server starts,
# each loading and capturing graphs, then 1.7 M prompt tokens and 811 new tokens a request
# per batch size. An H200 runs its larger batches (the plan says which). It spans
# leases: put an earlier lease's cost/results.json in OUTDIR/cost/ first, and the starts it
# holds in full are kept (server-cost --resume).
# IDENTITY_MODEL=SIZE (default 27b-8l) picks the model-dir of the identity steps, e.g. large,
# which loads and starts faster (not 27b: cost's weightless 27b directory). GRAPHS_ONLY=NAME[,NAME...] runs only those comparisons of
# contract-graphs.toml in the graphs steps (server-parity --only), e.g.
# graphs-g3-forced-reject for a short lease. COST_MM_DEEPGEMM=0 runs cost-slice's contract
# server on the Triton GEMM route, which skips DeepGEMM's JIT at its start.
# Usage: bash benchmark/gpu/server/start.sh OUTDIR [STEP...]
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=$1; shift
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(refusals reporter graphs-bf16 graphs-bf16-triton graphs-fp32 graphs-fp8kv gemm dram-bytes cost)
source benchmark/gpu/server/env.sh
trees=${TREES:-/tmp/srv-trees}
models=${MODELS:-/tmp/srv-models}
identity=${IDENTITY_MODEL:-27b-8l}  # the model-dir size of the identity steps
if [ "$identity" = 27b ]; then
  echo "campaign.sh: IDENTITY_MODEL=27b is cost's weightless directory: name 27b-8l, large or tiny" >&2
  exit 2
fi
mkdir -p "$out"
log() { echo "$(date -u +%H:%M:%S) $*" >> "$out/campaign.log"; }
vars=(--set "SERVER_PYTHON=$(command -v python3)" --set "TREE_SERIES=$trees/series"
  --set "TREE_0523=$trees/v0.5.23" --set "MODEL_DIR=$models/$identity/target"
  --set "DRAFT=$models/$identity/draft")
graphs() {  # graphs NAME SSM_DTYPE KV_DTYPE MM_DEEPGEMM
  python3 -m gdn_parity.cli server-parity benchmark/gpu/server/plans/contract-graphs.toml \
    --out "$out/$1" "${vars[@]}" --set "SSM_DTYPE=$2" --set "KV_DTYPE=$3" --set "MM_DEEPGEMM=$4" \
    ${GRAPHS_ONLY:+--only "$GRAPHS_ONLY"}
}
log "campaign: ${steps[*]}"
model_dir() {  # model_dir SIZE [ARGS...]: write $models/SIZE once
  [ -f "$models/$1/target/config.json" ] && return 0
  log "model-dir $1"
  python3 -m gdn_parity.cli model-dir "$1" "$models/$1" "${@:2}" >> "$out/model-dir.log" 2>&1 ||
    { log "model-dir $1 failed (exit $?)"; exit 1; }
}
cost() {  # cost PLAN NAME: goes on from OUTDIR/NAME/results.json where one is there
  model_dir 27b --no-weights
  local resume=()
  [ -f "$out/$2/results.json" ] && resume=(--resume)
  python3 -m gdn_parity.cli server-cost "benchmark/gpu/server/plans/$1.toml" --out "$out/$2" "${resume[@]}" \
    --set "SERVER_PYTHON=$(command -v python3)" --set "TREE_SERIES=$trees/series" \
    --set "MODEL_DIR=$models/27b/target" --set "DRAFT=$models/27b/draft" --set SSM_DTYPE=float32 \
    --set "MM_DEEPGEMM=${COST_MM_DEEPGEMM:-1}"
}
for step in "${steps[@]}"; do
  log "start $step"
  case $step in refusals|reporter|graphs-*) model_dir "$identity" --device cuda ;; esac
  case $step in
    refusals) bash benchmark/gpu/server/refusals.sh "$out/refusals" "$models/$identity/target" "$models/$identity/draft" ;;
    reporter) python3 -m gdn_parity.cli server-parity benchmark/gpu/server/plans/reporter-diagnostic.toml \
                --out "$out/reporter" "${vars[@]}" ;;
    graphs-bf16) graphs graphs-bf16 bfloat16 auto 1 ;;
    graphs-bf16-triton) graphs graphs-bf16-triton bfloat16 auto 0 ;;
    graphs-fp32) graphs graphs-fp32 float32 auto 1 ;;
    graphs-fp8kv) graphs graphs-fp8kv bfloat16 fp8_e4m3 1 ;;
    gemm) timeout 900 python3 benchmark/gpu/server/deepgemm_rows.py --tree "$trees/series" \
            --out "$out/gemm" --shapes 27b.in_proj_qkvz,27b.in_proj_ba,27b.o_proj,27b.down,27b.gate_up ;;
    dram-bytes) timeout 600 python3 benchmark/gpu/verify_dram_bytes.py table --tree "$trees/series" \
                  --out "$out/dram-bytes" --contexts 16384 --rows 2,4 ;;
    cost) cost cost-27b cost ;;
    cost-slice) cost cost-27b-slice cost-slice ;;
    *) log "unknown step $step"; continue ;;
  esac > "$out/$step.out" 2>&1  # each step's own lines (a cost run's cells as they finish), for poll.sh
  log "end $step: exit $?"
done
log "campaign done"
