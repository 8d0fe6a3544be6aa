#!/usr/bin/env bash
# Run on the GPU machine at the start of every call that carries parts (plan_calls.py prints
# them): checks each carried .gpu/srv/part-NN against .gpu/srv/SHA256SUMS (carried with every
# part) and moves it out of the checkout into $CARRY_DIR (default /tmp/srv-carry), where
# install.sh finds it. A part whose sha256 differs is deleted and refused (exit 2): carry it
# again. Usage: bash benchmark/gpu/server/receive.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
dest=${CARRY_DIR:-/tmp/srv-carry}
sums=.gpu/srv/SHA256SUMS
if [ ! -f "$sums" ]; then
  echo "receive.sh: no .gpu/srv/SHA256SUMS: carry it with every part" >&2
  exit 2
fi
mkdir -p "$dest"
for f in .gpu/srv/part-*; do
  [ -e "$f" ] || continue
  name=$(basename "$f")
  want=$(awk -v n="$name" '$2 == n { print $1 }' "$sums")
  have=$(sha256sum "$f" | cut -d' ' -f1)
  if [ "$have" != "$want" ]; then
    rm -f "$f"
    echo "receive.sh: $name does not match SHA256SUMS (a broken transfer, or parts of two builds): carry it again" >&2
    exit 2
  fi
  mv "$f" "$dest/$name"
done
cp "$sums" "$dest/SHA256SUMS"
echo "receive.sh: $(ls "$dest" | grep -c '^part-') of $(grep -c ' part-' "$sums") parts in $dest"
