#!/usr/bin/env bash
# Run on the GPU machine while a campaign runs (start.sh): waits until the campaign whose pid
# OUTDIR/campaign.pid holds has ended, or SECONDS pass. Then it prints the campaign's log and
# the running step's last lines, and packs OUTDIR (server logs cut to their last 400 lines)
# into $OUT/campaign.tgz, which the device call brings back.
# Usage: bash benchmark/gpu/server/poll.sh OUTDIR SECONDS
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "poll.sh: usage: poll.sh OUTDIR SECONDS" >&2
  exit 2
fi
out=$1 wait=$2
if [ ! -s "$out/campaign.pid" ]; then
  echo "poll.sh: no $out/campaign.pid: start the campaign with start.sh" >&2
  exit 2
fi
pid=$(cat "$out/campaign.pid")
alive() {  # the campaign runs: its process exists and is no zombie
  local stat
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
  [ "$(echo "${stat##*) }" | cut -d' ' -f1)" != Z ]
}
end=$((SECONDS + wait))
while [ $SECONDS -lt $end ] && alive; do sleep 1; done
cat "$out/campaign.log" 2>/dev/null
if alive; then
  step=$(sed -n 's/^[0-9:]* start //p' "$out/campaign.log" | tail -n 1)
  if [ -n "$step" ]; then
    echo "poll.sh: campaign $pid still runs; $step's last lines:"
    tail -n 5 "$out/$step.out" 2>/dev/null
  else
    echo "poll.sh: campaign $pid still runs"
  fi
else
  echo "poll.sh: campaign $pid has ended"
fi
pack=$(mktemp -d)
cp -r "$out" "$pack/campaign"
find "$pack/campaign" -name '*.log' -size +200k -exec sh -c 'tail -n 400 "$1" > "$1.tail" && mv "$1.tail" "$1"' _ {} \;
tar czf "${OUT:-/tmp}/campaign.tgz" -C "$pack" campaign
rm -rf "$pack"
ls -la "${OUT:-/tmp}/campaign.tgz"
