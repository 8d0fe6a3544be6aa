#!/usr/bin/env bash
# Run on the GPU machine after install.sh and trees.sh: starts campaign.sh detached, so it
# outlives the device call, and writes its pid to OUTDIR/campaign.pid for poll.sh. The
# campaign's variables (GRAPHS_ONLY, IDENTITY_MODEL, ...) pass through.
# Usage: bash benchmark/gpu/server/start.sh OUTDIR [STEP...]
set -euo pipefail
cd "$(dirname "$0")/../../.."
if [ $# -lt 1 ]; then
  echo "start.sh: usage: start.sh OUTDIR [STEP...]" >&2
  exit 2
fi
out=$1
mkdir -p "$out"
# A script's background job leads no process group, so setsid does not fork: $! is the
# campaign's own pid.
setsid bash benchmark/gpu/server/campaign.sh "$@" > /dev/null 2>&1 < /dev/null &
echo $! > "$out/campaign.pid"
echo "start.sh: campaign $! in $out: ${*:2}"
