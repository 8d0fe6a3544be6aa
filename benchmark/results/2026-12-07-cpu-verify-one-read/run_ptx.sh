#!/usr/bin/env bash
# The one-read verify kernel against decode's stage 1, compiled for sm_90 on the CPU (triton
# 3.8): floating-point and MMA instructions per row, and ptxas's registers and spills. Run
# from the repository's root with the project's venv and PYTHONPATH=python.
# TREE: a tree of this commit's patches (default: a fresh one).
set -euo pipefail
PY=${PYTHON:-python3}
H=$(dirname "$0")
T=${TREE:-$(mktemp -d)/tree}
[ -d "$T" ] || $PY -m gdn_parity.cli tree "$T" > /dev/null
PTXAS=$($PY -c 'import triton, os; print(os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/ptxas"))')
O=$(mktemp -d)
regs() { "$PTXAS" -arch=sm_90a -v "$1" -o /dev/null 2>&1 | sed -n 's/.*Used \([0-9]*\) registers.*/\1 registers/p; s/.* \([0-9]*\) bytes spill stores.*/\1 bytes spilled/p' | tr '\n' ' '; }
echo "## per row: KV heads dim page cap | rows 1 | rows 3"
for cfg in "bf16 24 4 256 1 0" "bf16 24 4 256 1 30" "fp8 24 4 256 1 0" "bf16 24 4 128 16 0" \
           "bf16 40 2 128 1 0" "bf16 8 8 128 1 0" "fp8 8 8 128 1 0" "bf16 8 8 64 16 0" \
           "bf16 8 8 256 1 30" "fp8 24 4 128 16 30"; do
  set -- $cfg
  $PY "$H/aot_ptx.py" "$T" decode $1 $2 $3 $4 1 $5 $6 > "$O/d.ptx" 2>/dev/null
  for rows in 1 3; do $PY "$H/aot_ptx.py" "$T" verify $1 $2 $3 $4 $rows $5 $6 > "$O/v$rows.ptx" 2>/dev/null; done
  echo "$cfg | $($PY "$H/compare_ops.py" "$O/d.ptx" "$O/v1.ptx" 1) | $($PY "$H/compare_ops.py" "$O/d.ptx" "$O/v3.ptx" 3)"
done
echo "## registers (ptxas): heads kv-heads dim | decode | verify rows 1 2 3 4 9"
for cfg in "24 4 256" "24 4 128" "8 8 128"; do
  set -- $cfg
  $PY "$H/aot_ptx.py" "$T" decode bf16 $1 $2 $3 1 1 0 > "$O/d.ptx" 2>/dev/null
  line="$cfg | $(regs "$O/d.ptx")|"
  for rows in 1 2 3 4 9; do
    $PY "$H/aot_ptx.py" "$T" verify bf16 $1 $2 $3 $rows 1 0 > "$O/v.ptx" 2>/dev/null
    line="$line $rows: $(regs "$O/v.ptx")|"
  done
  echo "$line"
done
