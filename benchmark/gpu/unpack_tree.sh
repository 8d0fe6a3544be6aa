#!/usr/bin/env bash
# Run on the GPU (device_setup.sh does): where /tmp/gdn-parity-gpu/series is missing and the
# call carried .gpu/tree.tar.xz (pack_tree.sh), unpack it there, after checking that it was
# packed from the patches this checkout carries. Nothing carried: nothing done.
set -euo pipefail
cd "$(dirname "$0")/../.."
G=/tmp/gdn-parity-gpu
[ -f .gpu/tree.tar.xz ] && [ ! -d $G/series ] || exit 0
if [ "$(cat .gpu/tree.series 2>/dev/null)" != "$(bash benchmark/gpu/series_digest.sh)" ]; then
  echo "unpack_tree.sh: .gpu/tree.tar.xz was packed from other patches than this checkout's:" \
    "run benchmark/gpu/pack_tree.sh and carry it again" >&2
  exit 1
fi
rm -rf $G/series.part && mkdir -p $G/series.part
tar xJf .gpu/tree.tar.xz -C $G/series.part
mv $G/series.part $G/series
