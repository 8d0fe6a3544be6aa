#!/usr/bin/env bash
# Run HERE, not on the GPU: lay out the checkout's series on the sglang 0.5.23 wheel
# (gdn-parity tree) and pack its files without .git into .gpu/tree.tar.xz (about 24 MB),
# with .gpu/tree.series: the sha256 of patches/series and every patch it names. A call that
# carries .gpu/tree.tar.xz and .gpu/whl (about 52 MB with the checkout) is self-contained for
# every group of run_27b.sh but cost: device_setup.sh checks that the checkout carries the same
# patches, unpacks the tree into /tmp/gdn-parity-gpu/series and lays out the base from it
# (unpack_tree.sh), so cost-now and identity need no sglang wheel (README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
PYTHONPATH=python python3 -m gdn_parity.cli tree "$tmp/series" > /dev/null
mkdir -p .gpu
tar cf - --exclude=.git -C "$tmp/series" . | xz -6 -T2 > .gpu/tree.tar.xz
bash benchmark/gpu/series_digest.sh > .gpu/tree.series
du -h .gpu/tree.tar.xz
