#!/usr/bin/env bash
# Run on the GPU machine once receive.sh has every part: checks the parts and the whole
# payload against SHA256SUMS and unpacks it into $SITE (default /tmp/srv-site; skipped where that
# already holds this payload). A carried .gpu/jit-cache.tar.xz (jit_cache.sh) goes into the
# servers' SGLANG_CACHE_DIR. Then record_env.sh. Usage: bash benchmark/gpu/server/install.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
dest=${CARRY_DIR:-/tmp/srv-carry}
site=${SITE:-/tmp/srv-site}
sums=$dest/SHA256SUMS
if [ ! -f "$sums" ]; then
  echo "install.sh: nothing received in $dest: run receive.sh in the calls that carry the parts" >&2
  exit 2
fi
payload=$(awk '$2 == "payload" { print $1 }' "$sums")
if [ "$(cat "$site/.payload" 2>/dev/null)" != "$payload" ]; then
  missing=$(awk '$2 ~ /^part-/ { print $2 }' "$sums" | while read -r p; do [ -f "$dest/$p" ] || echo "$p"; done)
  if [ -n "$missing" ]; then
    echo "install.sh: parts not received yet: $(echo $missing)" >&2
    exit 2
  fi
  if [ "$(cat "$dest"/part-* | sha256sum | cut -d' ' -f1)" != "$payload" ]; then
    echo "install.sh: the parts do not make the payload SHA256SUMS names (parts of two builds?)" >&2
    exit 2
  fi
  rm -rf "$site.part" && mkdir -p "$site.part"
  cat "$dest"/part-* | xz -dc -T0 | tar x -C "$site.part"
  rm -rf "$site" && mv "$site.part" "$site"
  echo "$payload" > "$site/.payload"
fi
echo "install.sh: $site holds payload ${payload:0:12}"
if [ -f .gpu/jit-cache.tar.xz ]; then  # it saves compile time only: the install stands without it
  (source benchmark/gpu/server/env.sh && bash benchmark/gpu/server/jit_cache.sh unpack .gpu/jit-cache.tar.xz) ||
    echo "install.sh: the servers will compile their kernels again"
fi
