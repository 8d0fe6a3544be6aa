#!/usr/bin/env bash
# Run HERE (fetch_wheels.sh calls it): make the cp312 triton 3.8 wheel fit one device call.
# The wheel (248 MB, sha256-checked by fetch_wheels.sh) holds a libtriton.so with its debug
# information (506 MB unpacked), profiler libraries (cupti, proton), the AMD backend and the
# Blackwell ptxas, none of which an H200 run of the series' kernels loads. This unpacks it,
# strips libtriton.so's debug sections (strip --strip-unneeded: the code is unchanged),
# drops those parts and the AMD backend's entry point, and packs the rest with xz: about
# 52 MB, one call's carry beside the checkout. The device unpacks it into /tmp/t38:
#   cd .gpu/t38x && sha256sum -c SHA256SUMS && mkdir -p /tmp/t38 && tar xJf t38-trim.tar.xz -C /tmp/t38
# Usage: trim_triton38.sh WHEEL OUTDIR
set -euo pipefail
wheel=$(realpath "$1") out=$(realpath -m "$2")  # absolute: the packing below runs in $work
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && unzip -q "$wheel")
rm -rf "$work"/triton/backends/nvidia/lib/cupti* "$work"/triton/backends/nvidia/bin/ptxas-blackwell \
  "$work"/triton/_C/libproton.so "$work"/triton/instrumentation/*.so "$work"/triton/backends/amd
sed -i '/amd/d' "$work"/triton-*.dist-info/entry_points.txt
strip --strip-unneeded "$work"/triton/_C/libtriton.so
mkdir -p "$out"
(cd "$work" && tar cf - --sort=name --mtime=@0 --owner=0 --group=0 . | xz -9e -T2 > "$out/t38-trim.tar.xz")
(cd "$out" && sha256sum t38-trim.tar.xz > SHA256SUMS)
du -sh "$out/t38-trim.tar.xz"
