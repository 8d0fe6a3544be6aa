#!/usr/bin/env bash
# Run on the GPU machine: the two sglang trees a server comparison imports, from a carried
# .gpu/tree.tar.xz (benchmark/gpu/pack_tree.sh): $TREES/series (0.5.23 with the whole series)
# and $TREES/v0.5.23 (the pinned base, laid out from the series' tree with the patches taken
# back; unpack_tree.sh refuses a tarball of other patches than the checkout's).
# Usage: bash benchmark/gpu/server/trees.sh   (TREES defaults to /tmp/srv-trees)
set -euo pipefail
cd "$(dirname "$0")/../../.."
trees=${TREES:-/tmp/srv-trees}
export GDN_PARITY_CACHE=${GDN_PARITY_CACHE:-/tmp/gdn-parity-cache} PYTHONPATH=$PWD/python
bash benchmark/gpu/unpack_tree.sh
mkdir -p "$trees"
[ -e "$trees/series" ] || ln -s /tmp/gdn-parity-gpu/series "$trees/series"
if [ ! -d "$trees/v0.5.23" ]; then
  base=$(python3 -c "import sys; from pathlib import Path
from gdn_parity.queue.base import base_repo_from_tree
from gdn_parity.queue.series import load_series
print(base_repo_from_tree(load_series(), Path(sys.argv[1])))" /tmp/gdn-parity-gpu/series)
  git clone -q --branch base "$base" "$trees/v0.5.23.part"
  mv "$trees/v0.5.23.part" "$trees/v0.5.23"
fi
echo "trees.sh: $trees/series, $trees/v0.5.23 ($(git -C "$trees/v0.5.23" rev-parse --short HEAD))"
