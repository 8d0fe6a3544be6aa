#!/usr/bin/env bash
# Device command for issue #24 at a Qwen3.5-27B's shapes. Carry .gpu/whl, .gpu/tree.tar.xz and
# .gpu/tree.series (pack_tree.sh); cost also needs the sglang wheel, carried into
# /tmp/gdn-parity-cache/wheels/ by an earlier call on the same warm machine (benchmark/README.md).
# Arguments: the groups to run, in order:
#   tiles     gemm_tiles.py --sweep: patch 0009's kernel at candidate tiles vs cuBLAS
#   grid      gemm_tiles.py --grid GRID_SHAPES (27b.in_proj_ba,27b.o_proj): a grid of tiles,
#             K chunks up to 1024, at the shapes that missed the goal
#   splitk    studies/splitk_study.py: a fixed split-K (2, 4, 8, 16) for the weights of at most 256
#             columns, at every M (decode, verify and prefill sizes): rows over M = 1..512,
#             time against cuBLAS and the mode's GEMM
#   fixed-split  studies/fixed_split_study.py: a K split fixed by the weight (S 2 and 4 for the wide
#             weights, 0012's S 4 for in_proj_ba), run through partials or in one program per
#             tile, and 0009's kernel at untried tiles, at M 64 to 8192 (FIXED_SPLIT_SHAPES
#             chooses): rows against each candidate's reference, time against cuBLAS, the
#             dispatched GEMM and the persistent kernel
#   tma       studies/tma_tile_study.py: the wide weights at 128-256 rows through TMA loads, one tile per
#             program or one program per SM (4-warp tiles also warp-specialized): rows against
#             the dispatched GEMM at M = 1..512, time against cuBLAS and the dispatched GEMM;
#             each candidate in a child process of at most 45 s, none started after
#             TMA_LIMIT - 30 s (default 300): those not started are listed as not run
#   table     gemm_tiles.py --table: the mode's GEMM as the tree dispatches it (0009, 0012),
#             cuBLAS, the persistent kernel, the floor (the GEMM table)
#   tests     the series' CUDA tests named by TESTS_MATCH (run_upstream_tests.sh; default
#             batch_invariant: 0009's)
#   cost      gdn-parity cost --size 27b (64 layers), N 1,4,16,64, gamma 1,3: the series
#             before 0009 (0.5.23, exact-parity, deterministic-exact-parity), then the
#             series up to 0009 (deterministic-exact-parity)
#   cost-now  the same cost table for the checkout's series alone: 0.5.23 and
#             deterministic-exact-parity (COST_BATCHES, default 1,4,16,64: batch 64 needs
#             about 78 GiB with the snapshots in host memory, which an 80 GB H100 takes by
#             the estimate; it ran out there on 2026-12-06 with the first pools held, since
#             freed (backends.import_sglang_modules), and then ran there alone (session 22):
#             run 1,4,16 and then 64 in its own call;
#             COST_GAMMAS, default 1,3; COST_ROUNDS, default 1: the two variants that many
#             times in alternating order, ratios taken within a round, e.g. COST_BATCHES=64
#             COST_GAMMAS=3 COST_ROUNDS=3 for issue #24's thinnest row; COST_PROFILE=1: cost
#             --profile, each step's kernels side by side, in a process of each variant's own)
#   cost-contexts  issue #47's table: cost-now at each context list of CONTEXTS (default
#             "24,1024 4096 16384 32768"), each its own table and process, so a context that runs
#             out of time (COST_NOW_LIMIT) loses only its own rows; a (context, batch) that does
#             not fit the GPU is skipped by cost itself, with its 'not run' row
#   series-ab the checkout's series (a) against another (b: SERIES_B, a patches/ folder carried
#             under .gpu/, e.g. the series before a change) on one machine: the cost-now table
#             (COST_BATCHES, default 64; COST_GAMMAS, default 3) for each letter of AB_ORDER in
#             turn (default "a b"). The contract's variant tree is laid out again at each switch.
#   identity  gdn-parity demo --size 27b-8l: deterministic-exact-parity vs Base at batch
#             1,4,16,64, bf16 and fp32 SSM pools, TOKENS tokens (300), forced reject gamma 1
#             and 4, natural acceptance gamma 3; the demos side by side (BATCHES, POOLS
#             choose; each takes about 22 GiB, 27 GiB at batch 64 with an fp32 pool)
# TRITON=3.8 runs triton 3.8 from /tmp/t38 (benchmark/README.md). Everything lands in
# /tmp/27b-out and comes back as $OUT/27b-$tag.tar.gz, with the tables beside it.
set -uo pipefail
source benchmark/gpu/device_setup.sh /tmp/27b-out
G=/tmp/gdn-parity-gpu
[ -d $G/series ] || python3 -m gdn_parity.cli tree $G/series > /tmp/27b-out/tree.log 2>&1 || exit 1
tag=t$(python3 -c "import triton; print(triton.__version__.replace('.', ''))")
O=/tmp/27b-out/$tag
mkdir -p $O
# The cost table of 0.5.23 and the contract's stack (cost-now, series-ab) into $O/$1 and its log:
# $2 the batches, $3 the gammas; REPLAYS, COST_ROUNDS, COST_PROFILE and COST_NOW_LIMIT as above;
# COST_PATCHES: another series than the checkout's; COST_CONTEXTS: cost --context (each
# request's prefill length; default the reporter's 24 ids).
cost_table() {
  timeout "${COST_NOW_LIMIT:-300}" python3 -m gdn_parity.cli \
    ${COST_PATCHES:+--patches "$COST_PATCHES"} cost --size 27b --batch "$2" \
    ${COST_CONTEXTS:+--context "$COST_CONTEXTS"} \
    --gamma "$3" --replays "${REPLAYS:-30}" --rounds "${COST_ROUNDS:-1}" \
    $([ "${COST_PROFILE:-0}" = 1 ] && echo --profile) \
    --variants 0.5.23,deterministic-exact-parity --out "$O/$1" > "$O/$1.log" 2>&1
}
for group in "$@"; do
  start=$SECONDS
  case $group in
    tiles)
      timeout "${TILES_LIMIT:-240}" python3 benchmark/gpu/gemm_tiles.py --tree $G/series --out $O \
        --sweep > $O/tiles.log 2>&1 ;;
    grid)
      timeout "${GRID_LIMIT:-240}" python3 benchmark/gpu/gemm_tiles.py --tree $G/series --out $O \
        --grid "${GRID_SHAPES:-27b.in_proj_ba,27b.o_proj}" > $O/grid.log 2>&1
      cp $O/gemm_tiles_grid.md "$OUT/gemm_tiles_grid_$tag.md" ;;
    splitk)
      timeout "${SPLITK_LIMIT:-240}" python3 benchmark/gpu/studies/splitk_study.py --tree $G/series \
        --out $O > $O/splitk.log 2>&1
      cp $O/splitk_study.md "$OUT/splitk_study_$tag.md" ;;
    fixed-split)
      timeout "${FIXED_SPLIT_LIMIT:-300}" python3 benchmark/gpu/studies/fixed_split_study.py \
        --tree $G/series --out $O ${FIXED_SPLIT_SHAPES:+--shapes $FIXED_SPLIT_SHAPES} \
        > $O/fixed_split.log 2>&1
      cp $O/fixed_split_study.md "$OUT/fixed_split_study_$tag.md" ;;
    tma)
      timeout "${TMA_LIMIT:-300}" python3 benchmark/gpu/studies/tma_tile_study.py --tree $G/series \
        --out $O ${TMA_SHAPES:+--shapes $TMA_SHAPES} --total-limit $((${TMA_LIMIT:-300} - 30)) \
        > $O/tma.log 2>&1
      cp $O/tma_tile_study.md "$OUT/tma_tile_study_$tag.md" ;;
    table)
      timeout "${TABLE_LIMIT:-180}" python3 benchmark/gpu/gemm_tiles.py --tree $G/series --out $O \
        --table > $O/table.log 2>&1
      cp $O/gemm_table.md "$OUT/gemm_table_$tag.md" ;;
    tests)
      TESTS_MATCH=${TESTS_MATCH:-batch_invariant} TESTS_OUT=$O timeout "${TESTS_LIMIT:-600}" \
        bash benchmark/gpu/run_upstream_tests.sh
      cp $O/upstream_tests.log "$OUT/upstream_tests_$tag.log" ;;
    cost)
      P7=/tmp/patches7 && rm -rf $P7 && mkdir -p $P7 && cp patches/*.patch $P7/ && rm $P7/0009-*
      grep -v '^0009-' patches/series > $P7/series
      C=(cost --size 27b --batch "${COST_BATCHES:-1,4,16,64}" --gamma 1,3 --replays "${REPLAYS:-30}")
      timeout "${COST_BEFORE_LIMIT:-330}" python3 -m gdn_parity.cli --patches $P7 "${C[@]}" \
        --variants 0.5.23,exact-parity,deterministic-exact-parity --out $O/cost-before \
        > $O/cost-before.log 2>&1
      timeout "${COST_AFTER_LIMIT:-150}" python3 -m gdn_parity.cli "${C[@]}" \
        --variants deterministic-exact-parity --out $O/cost-after > $O/cost-after.log 2>&1
      cat $O/cost-before/cost.md $O/cost-after/cost.md > "$OUT/cost_$tag.md" 2>/dev/null ;;
    cost-now)
      cost_table cost-now "${COST_BATCHES:-1,4,16,64}" "${COST_GAMMAS:-1,3}"
      cp $O/cost-now/cost.md "$OUT/cost_now_$tag.md"
      cp $O/cost-now/profile.json "$OUT/profile_$tag.json" 2>/dev/null ;;
    cost-contexts)
      for ctx in ${CONTEXTS:-24,1024 4096 16384 32768}; do
        COST_CONTEXTS=$ctx cost_table "cost-ctx-${ctx//,/-}" "${COST_BATCHES:-1,4,16,64}" \
          "${COST_GAMMAS:-1,3}"
        cp "$O/cost-ctx-${ctx//,/-}/cost.md" "$OUT/cost_ctx_${ctx//,/-}_$tag.md"
      done ;;
    series-ab)
      i=0
      for s in ${AB_ORDER:-a b}; do
        i=$((i + 1))
        COST_PATCHES=$([ "$s" = b ] && echo "${SERIES_B:?series-ab needs SERIES_B}") \
          cost_table cost-series-$i$s "${COST_BATCHES:-64}" "${COST_GAMMAS:-3}"
        cp $O/cost-series-$i$s/cost.md "$OUT/cost_series_$i${s}_$tag.md"
      done ;;
    identity)
      for b in ${BATCHES:-1 4 16 64}; do
        for pool in ${POOLS:-bfloat16 float32}; do
          ( timeout "${DEMO_LIMIT:-300}" python3 -m gdn_parity.cli demo --device cuda \
              --size 27b-8l --tokens "${TOKENS:-300}" --gammas 1,4 --natural-gamma 3 \
              --accept-rates 0.9 --batch $b --ssm-dtype $pool \
              --variants deterministic-exact-parity --stop-at-divergence \
              --out $O/identity-$b-$pool > $O/identity-$b-$pool.log 2>&1
            echo "identity-$b-$pool: exit $?" >> $O/identity.txt ) &
        done
      done
      wait
      tail -n 3 $O/identity-*/demo.md > "$OUT/identity_$tag${BATCHES:+_}${BATCHES// /-}.txt" 2>&1 ;;
  esac
  echo "$group ($tag): $((SECONDS - start)) s" | tee -a $O/groups.txt
done
cp /tmp/27b-out/env.txt $O/ 2>/dev/null
tar czf "$OUT/27b-$tag${RUN:+-$RUN}.tar.gz" -C /tmp/27b-out $tag
