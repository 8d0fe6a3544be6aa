#!/usr/bin/env bash
# The page's runs, on the CPU: trees of the series' prefixes, each kernel compiled for
# sm_90 before and after the patch, then compared. Run from the repository's root with
# the project's venv (triton 3.8) and PYTHONPATH=python.
set -euo pipefail
PY=${PYTHON:-python3}
H=$(dirname "$0")
T=${TREES:-/tmp/aot-trees}
mkdir -p "$T"
[ -d "$T/series" ] || $PY -m gdn_parity.cli tree "$T/series"
tree_at() { # N: base + patches 0001..N
  local n=$(git -C "$T/series" rev-list --count base..HEAD)
  [ -d "$T/p$1" ] || git -C "$T/series" worktree add -q --detach "$T/p$1" "HEAD~$((n - $1))"
  echo "$T/p$1"
}
# PTX without source locations and debug sections: what the GPU runs.
code() { grep -v -E '^\s*\.(loc|file)\b|^\s*//|^\$L__(tmp|func)|\.debug_|^\s*\.b8|^\s*\.b32 |^\s*\.b64 \$L__' "$1" | sed '/\.section\s*\.debug/,$d'; }
ops() { grep -o -E '^\s*(@!?%p[0-9]+ )?\s*[a-z][a-z0-9._:]*' "$1" | sed 's/@!\?%p[0-9]* //; s/^\s*//' | sort | uniq -c; }
O=$(mktemp -d)
echo "## packed decode: 0001..0002 against 0001..0003"
for pair in "bf16 bf16" "fp16 fp16"; do
  set -- $pair
  $PY "$H/aot_ptx.py" "$(tree_at 2)" packed-decode "$1" "$2" > "$O/before.ptx" 2>/dev/null
  $PY "$H/aot_ptx.py" "$(tree_at 3)" packed-decode "$1" "$2" > "$O/after.ptx" 2>/dev/null
  echo "act $1, pool $2: $($PY "$H/compare_stores.py" "$O/before.ptx" "$O/after.ptx" | tr '\n' ';')"
  # Negative control: the 50th fma of the kernel after, its addend and second factor swapped.
  n=$(grep -n "fma.rn.f32" "$O/after.ptx" | sed -n 50p | cut -d: -f1)
  sed -E "${n}s/fma.rn.f32 \t(%r[0-9]*), (%r[0-9]*), (%r[0-9]*), (%r[0-9]*)/fma.rn.f32 \t\1, \2, \4, \3/" "$O/after.ptx" > "$O/mutated.ptx"
  echo "  one fma swapped: $($PY "$H/compare_stores.py" "$O/before.ptx" "$O/mutated.ptx" | tr '\n' ';')"
done
echo "## few-rows kernel: 0001..0011 against 0001..0012 (identical code after stripping locations)"
for cfg in "bf16 16,16,512,2,4 0" "bf16 64,128,128,4,4 0" "bf16 128,128,64,8,3 0" "bf16 16,16,256,2,4 1" \
           "fp16 16,64,128,2,4 0" "fp16 32,32,256,2,4 0" "fp32 64,64,64,4,5 0" "fp32 128,32,64,4,3 0"; do
  set -- $cfg
  $PY "$H/aot_ptx.py" "$(tree_at 11)" few-rows $1 $2 $3 > "$O/a.ptx" 2>/dev/null
  $PY "$H/aot_ptx.py" "$(tree_at 12)" few-rows $1 $2 $3 > "$O/b.ptx" 2>/dev/null
  echo "$cfg: $(diff <(code "$O/a.ptx") <(code "$O/b.ptx") | grep -c '^[<>]' || true) differing lines of $(code "$O/b.ptx" | wc -l)"
done
echo "## split-K kernel: 0012 before the shared loop (SPLIT_K_BEFORE tree) against 0012"
if [ -n "${SPLIT_K_BEFORE:-}" ]; then
  for cfg in "bf16 16,16,256,2,4 0" "bf16 32,32,256,2,4 0" "bf16 64,32,256,4,3 0" "bf16 128,32,128,4,3 0" \
             "bf16 128,128,128,8,3 0" "bf16 16,16,256,2,4 1" "fp16 32,32,256,2,4 0" "fp32 16,16,128,2,4 0" "fp32 128,128,64,8,3 0"; do
    set -- $cfg
    $PY "$H/aot_ptx.py" "$SPLIT_K_BEFORE" split-k $1 $2 $3 > "$O/a.ptx" 2>/dev/null
    $PY "$H/aot_ptx.py" "$(tree_at 12)" split-k $1 $2 $3 > "$O/b.ptx" 2>/dev/null
    fa=$(ops <(code "$O/a.ptx") | grep -E 'mma|\.f32|\.f16|\.bf16' || true)
    fb=$(ops <(code "$O/b.ptx") | grep -E 'mma|\.f32|\.f16|\.bf16' || true)
    [ "$fa" = "$fb" ] && same=yes || same=no
    echo "$cfg: floating-point and MMA instructions the same multiset: $same"
  done
fi
