#!/usr/bin/env bash
# Run on the GPU (device_setup.sh does, with GDN_PARITY_CACHE and PYTHONPATH set): where the
# call carried .gpu/tree.tar.xz (pack_tree.sh), after checking that it was packed from the
# patches this checkout carries, unpack it into /tmp/gdn-parity-gpu/series where that is
# missing, and lay out the base in gdn-parity's cache from it (the patches taken back), where
# the cache lacks it: the groups that materialise trees (cost, cost-now, identity) then need
# no sglang wheel. Nothing carried: nothing done.
set -euo pipefail
cd "$(dirname "$0")/../.."
G=/tmp/gdn-parity-gpu
[ -f .gpu/tree.tar.xz ] || exit 0
if [ "$(cat .gpu/tree.series 2>/dev/null)" != "$(bash benchmark/gpu/series_digest.sh)" ]; then
  echo "unpack_tree.sh: .gpu/tree.tar.xz was packed from other patches than this checkout's:" \
    "run benchmark/gpu/pack_tree.sh and carry it again" >&2
  exit 1
fi
if [ ! -d $G/series ]; then
  rm -rf $G/series.part && mkdir -p $G/series.part
  tar xJf .gpu/tree.tar.xz -C $G/series.part
  mv $G/series.part $G/series
fi
python3 -c "import sys; from pathlib import Path
from gdn_parity.queue.base import base_repo_from_tree
from gdn_parity.queue.series import load_series
base_repo_from_tree(load_series(), Path(sys.argv[1]))" $G/series
