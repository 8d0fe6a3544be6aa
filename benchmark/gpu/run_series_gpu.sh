#!/usr/bin/env bash
# Device command for the series on an H200: lay out the trees with gdn-parity's
# own code, then (per STEP) the randomized parity soak, the cold-state benchmark,
# the conv parity check, the series' upstream-style CUDA tests and the state
# trace's host-copy cost.
# Carry .gpu/whl (cp312 wheels) and the sglang wheel (.gpu/sglang-0.5.23-*.whl)
# on the first call; later calls on the same warm machine reuse /tmp.
# TRITON=3.8 uses the triton 3.8 wheel unpacked at /tmp/t38 (see benchmark/README.md).
set -uo pipefail
export PYTHONPATH=/tmp/site:$PWD/python SGLANG_CACHE_DIR=/tmp/sglang-cache PYTHONUNBUFFERED=1
export GDN_PARITY_CACHE=/tmp/gdn-parity-cache
if [ "${TRITON:-}" = 3.8 ]; then
  export PYTHONPATH=/tmp/t38:$PYTHONPATH TRITON_CACHE_DIR=/tmp/triton-cache-38
fi
G=/tmp/gdn-parity-gpu
if [ ! -d $G/series ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || exit 1
  mkdir -p "$GDN_PARITY_CACHE/wheels" && cp .gpu/sglang-0.5.23-*.whl "$GDN_PARITY_CACHE/wheels/" || exit 1
  python3 -m gdn_parity.cli tree $G/series || exit 1
  git -C $G/series worktree add -q $G/base base || exit 1
  n=$(git -C $G/series rev-list --count base..HEAD)
  git -C $G/series worktree add -q --detach $G/p3 HEAD~$((n - 4)) || exit 1  # 0001..0004
  git -C $G/series worktree add -q --detach $G/p4 HEAD~$((n - 5)) || exit 1  # 0001..0005
fi
python3 -c "import torch, triton; print(torch.cuda.get_device_name(), torch.__version__, triton.__version__)"
tag=t$(python3 -c "import triton; print(triton.__version__.replace('.', ''))")
mkdir -p "$OUT/$tag"
for step in ${STEPS:-soak bench conv tests trace}; do
  case $step in
    soak) timeout "${SOAK_S:-300}" python3 benchmark/gpu/soak_parity.py --tree $G/series --base-tree $G/base \
            --rounds "${ROUNDS:-10000}" --seed "${SEED:-3}" --out "$OUT/$tag" --dump 2>&1 | tail -14 ;;
    bench) timeout "${BENCH_S:-300}" python3 benchmark/gpu/bench_packed.py --tree $G/series --base-tree $G/base \
            --out "$OUT/$tag" --tag="_$tag" ${BENCH_ARGS:-} 2>&1 | tail -3 ;;
    conv) python3 benchmark/gpu/conv_parity.py --before $G/p3 --after $G/p4 --out "$OUT/$tag" 2>&1 | tail -3 ;;
    tests) TESTS_OUT="$OUT/$tag" bash benchmark/gpu/run_upstream_tests.sh 2>&1 | tail -12 ;;
    trace) python3 benchmark/gpu/state_trace_overhead.py --tree $G/series 2>&1 | tee "$OUT/$tag/trace_overhead.md" ;;
  esac
done
