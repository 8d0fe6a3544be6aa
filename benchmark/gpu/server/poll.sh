#!/usr/bin/env bash
# Run on the GPU machine while campaign.sh runs: waits until it logs "campaign done" or
# SECONDS pass, prints its log, and packs OUTDIR (server logs cut to their last 400 lines) into
# $OUT/campaign.tgz, which the device call brings back.
# Usage: bash benchmark/gpu/server/poll.sh OUTDIR SECONDS
set -uo pipefail
out=$1 wait=$2
end=$((SECONDS + wait))
while [ $SECONDS -lt $end ] && ! grep -q "campaign done" "$out/campaign.log" 2>/dev/null; do sleep 5; done
cat "$out/campaign.log"
pack=$(mktemp -d)
cp -r "$out" "$pack/campaign"
find "$pack/campaign" -name '*.log' -size +200k -exec sh -c 'tail -n 400 "$1" > "$1.tail" && mv "$1.tail" "$1"' _ {} \;
tar czf "${OUT:-/tmp}/campaign.tgz" -C "$pack" campaign
rm -rf "$pack"
ls -la "${OUT:-/tmp}/campaign.tgz"
