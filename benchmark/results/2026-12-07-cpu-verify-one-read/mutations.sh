#!/usr/bin/env bash
# The registered CUDA test of patch 0007, under the Triton interpreter at the CPU test bed's
# shapes, against the series' tree and against copies whose one-read kernel is changed on
# purpose. Run from the repository's root with the project's venv and PYTHONPATH=python.
# TREE: a tree `gdn-parity tree` made from this commit's patches (default: a fresh one).
set -euo pipefail
PY=${PYTHON:-python3}
T=${TREE:-$(mktemp -d)/tree}
[ -d "$T" ] || $PY -m gdn_parity.cli tree "$T" > /dev/null
KERNEL=python/sglang/kernels/ops/attention/verify_decode_attention.py
TEST=test/registered/kernels/ops/attention/test_triton_verify_as_decode.py
SETTINGS='{"TestTritonVerifyAsDecode": {"DEVICE": "cpu", "CONTEXT_LEN": 336,
  "LENGTHS": [1, 250, 255, 256, 316, 319], "SHAPES": [[4, 2, 16, 3], [2, 2, 16, 2]],
  "DRAFT_COUNTS": [1, 4, 8], "GRAPH_PADDING": 2}}'
declare -A MUTATION=(
  [none]=''
  # The block order inside a split: blocks of 16 (GQA) and 32 (MHA) tokens, not 32 and 64.
  [block-size]='s/^_GROUPED_BLOCK_N = 32/_GROUPED_BLOCK_N = 16/; s/^_NORMAL_BLOCK_N = 64/_NORMAL_BLOCK_N = 32/'
  # The split boundaries: every row of a request split at its longest row's split length.
  [one-split-length]='s/key = tl.where(per_split >= kv_len, 0, per_split)/key = 0 * per_split/'
  # A row folds in the blocks past its end in the split, as masked no-ops.
  [no-op-blocks]='s/active = start_n < ends\[j\]/active = start_n < loop_end/'
  # A row's V tile past its end keeps the longer rows' values (its weights there are 0).
  [unmasked-v]='s/v = tl.where(in_row\[:, None\], v_block, tl.zeros_like(v_block))/v = v_block/'
)
for name in none block-size one-split-length no-op-blocks unmasked-v; do
  copy=$(mktemp -d)/tree
  git -C "$T" worktree add -q --detach "$copy" HEAD
  if [ -n "${MUTATION[$name]}" ]; then
    sed -i "${MUTATION[$name]}" "$copy/$KERNEL"
    git -C "$copy" diff --quiet && { echo "$name: the mutation did not apply"; exit 1; }
  fi
  out=$($PY test/helpers/registered.py "$copy" "$TEST" "$SETTINGS" 2>&1 | grep '^registered-result: ')
  echo "$name: $(echo "${out#registered-result: }" | $PY "$(dirname "$0")/summarize.py")"
  git -C "$T" worktree remove --force "$copy"
done
