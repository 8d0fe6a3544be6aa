#!/usr/bin/env bash
# Run on the GPU machine after install.sh and trees.sh: starts campaign.sh detached, so it
# outlives the device call, and writes its pid to OUTDIR/campaign.pid for poll.sh. The
# campaign's variables (GRAPHS_ONLY, IDENTITY_MODEL, ...) pass through.
# Usage: bash benchmark/gpu/server/start.sh OUTDIR [STEP...]
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "start.sh: usage: start.sh OUTDIR [STEP...]" >&2
  exit 2
fi
out=$(realpath -m "$1")
shift
cd "$(dirname "$0")/../../.."
if [ -s "$out/campaign.pid" ] && bash benchmark/gpu/server/poll.sh "$out" --running; then
  echo "start.sh: a campaign still runs in $out: poll it, or give another OUTDIR" >&2
  exit 2
fi
mkdir -p "$out"
# A script's background job leads no process group, so setsid does not fork: $! is the
# campaign's own pid. Its start time (field 22 of /proc/PID/stat) tells it from a later
# process that reuses the pid.
setsid bash benchmark/gpu/server/campaign.sh "$out" "$@" > /dev/null 2>&1 < /dev/null &
pid=$!
stat=$(cat "/proc/$pid/stat" 2>/dev/null || true)
echo "$pid $(echo "${stat##*) }" | cut -d' ' -f20)" > "$out/campaign.pid"
echo "start.sh: campaign $pid in $out: $*"
