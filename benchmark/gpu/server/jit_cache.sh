#!/usr/bin/env bash
# The kernels a server compiles on its first start, kept from one lease for the next:
# DeepGEMM's bf16 GEMMs under the contract (SGLANG_CACHE_DIR/deep_gemm) and sglang's JIT
# kernels (SGLANG_JIT_CACHE_DIR, which env.sh puts under SGLANG_CACHE_DIR). Triton keeps its
# own cache (env.sh), which stays out: a triton folder here is left out too.
# pack FILE: packs SGLANG_CACHE_DIR into FILE (tar.xz). Run it in a poll's call with FILE
#   under $OUT, not in the campaign's OUTDIR: a device call returns files of at most 16 MiB,
#   and poll.sh packs OUTDIR whole. A larger pack is refused.
# unpack FILE: lays FILE into SGLANG_CACHE_DIR. Keep FILE as .gpu/jit-cache.tar.xz and carry
#   it (plan_calls.py .gpu/jit-cache.tar.xz); install.sh unpacks it. DeepGEMM keys its kernels
#   by nvcc's version, its flags (sm_90a) and the source, not by paths: an H100's suit an H200.
# Source env.sh first: it sets SGLANG_CACHE_DIR. Usage: jit_cache.sh pack|unpack FILE
set -uo pipefail
LIMIT=$((15 * 1048576))  # under the 16 MiB a device call returns per file
fail() { echo "jit_cache.sh: $*" >&2; exit 2; }
tmp=
trap 'rm -rf "$tmp"' EXIT  # a refused or killed run leaves no temporary file
trap 'exit 2' INT TERM
[ $# -eq 2 ] || fail "usage: jit_cache.sh pack|unpack FILE"
verb=$1 file=$2
[ -n "${SGLANG_CACHE_DIR:-}" ] || fail "SGLANG_CACHE_DIR is not set: source benchmark/gpu/server/env.sh"
cache=$SGLANG_CACHE_DIR
case $verb in
  pack)
    [ -d "$file" ] && fail "$file is a folder: name the file to write"
    [ -n "$(find "$cache" -mindepth 1 -maxdepth 1 ! -name triton 2> /dev/null)" ] ||
      fail "$cache holds nothing compiled: run the servers first"
    tmp=$(mktemp "$file.part.XXXXXX" 2> /dev/null) || fail "cannot write $file"
    tar cJf "$tmp" -C "$cache" --exclude=./triton . 2> /dev/null || fail "could not pack $cache"
    size=$(stat -c %s "$tmp")
    [ "$size" -le "$LIMIT" ] ||
      fail "$cache packs into $((size / 1048576)) MiB, over the 15 MiB a device call returns"
    mv "$tmp" "$file" 2> /dev/null || fail "cannot write $file"
    tmp=
    echo "jit_cache.sh: $file holds $cache's kernels ($((size / 1024)) KiB)"
    ;;
  unpack)
    [ -f "$file" ] || fail "no $file"
    tar tJf "$file" > /dev/null 2>&1 || fail "$file is not a tar.xz that pack wrote"
    # Unpacked apart first, so that a failure leaves the cache as it was.
    tmp=$(mktemp -d 2> /dev/null) || fail "cannot make a temporary folder"
    tar xJf "$file" -C "$tmp" 2> /dev/null || fail "could not unpack $file"
    mkdir -p "$cache" 2> /dev/null && cp -a "$tmp/." "$cache/" 2> /dev/null ||
      fail "could not copy $file's kernels into $cache"
    echo "jit_cache.sh: $cache now holds $file's kernels"
    ;;
  *) fail "usage: jit_cache.sh pack|unpack FILE" ;;
esac
