#!/usr/bin/env bash
# The kernels a server compiles on its first start (DeepGEMM's bf16 GEMMs under the contract:
# about 3.5 min on an H100; sglang's JIT kernels), kept from one lease for the next.
# pack FILE: after a campaign, packs SGLANG_CACHE_DIR's compiled kernels into FILE (tar.xz).
#   campaign.sh's step jit-cache runs it; FILE comes back in the poll's campaign.tgz.
# unpack FILE: before the servers start, lays FILE into SGLANG_CACHE_DIR. Put FILE in the
#   checkout as .gpu/jit-cache.tar.xz and carry it (plan_calls.py .gpu/jit-cache.tar.xz);
#   install.sh unpacks it. The kernels were compiled for SM90: an H100's suit an H200.
# SGLANG_CACHE_DIR: env.sh's (/tmp/sglang-cache). Its triton folder stays out: env.sh gives
# Triton its own cache, and sglang's is empty.
set -uo pipefail
usage() { echo "jit_cache.sh: usage: jit_cache.sh pack|unpack FILE" >&2; exit 2; }
[ $# -eq 2 ] || usage
verb=$1 file=$2
cache=${SGLANG_CACHE_DIR:?jit_cache.sh: set SGLANG_CACHE_DIR (source env.sh)}
case $verb in
  pack)
    if [ ! -d "$cache" ] || [ -z "$(ls -A "$cache")" ]; then
      echo "jit_cache.sh: $cache holds nothing compiled: run the servers first" >&2
      exit 2
    fi
    tmp=$(mktemp "$file.part.XXXXXX" 2> /dev/null) || { echo "jit_cache.sh: cannot write $file" >&2; exit 2; }
    if ! tar cJf "$tmp" -C "$cache" --exclude=./triton .; then
      rm -f "$tmp"
      echo "jit_cache.sh: could not pack $cache" >&2
      exit 2
    fi
    mv "$tmp" "$file"
    echo "jit_cache.sh: $file holds $cache ($(du -sh "$cache" | cut -f1) unpacked, $(du -h "$file" | cut -f1) packed)"
    ;;
  unpack)
    if [ ! -f "$file" ]; then
      echo "jit_cache.sh: no $file" >&2
      exit 2
    fi
    if ! tar tJf "$file" > /dev/null 2>&1; then
      echo "jit_cache.sh: $file is not a tar.xz that pack wrote" >&2
      exit 2
    fi
    mkdir -p "$cache" && tar xJf "$file" -C "$cache"
    echo "jit_cache.sh: $cache now holds $file's kernels"
    ;;
  *) usage ;;
esac
