#!/usr/bin/env bash
# The sha256 of patches/series and the patches it names, in its order: what pack_tree.sh
# records beside .gpu/tree.tar.xz and device_setup.sh compares with the carried checkout's.
set -euo pipefail
cd "$(dirname "$0")/../.."
{
  cat patches/series
  grep -v '^#' patches/series | grep . | while read -r patch; do cat "patches/$patch"; done
} | sha256sum | cut -d' ' -f1
