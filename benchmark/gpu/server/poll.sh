#!/usr/bin/env bash
# Run on the GPU machine while a campaign runs (start.sh): waits until the campaign whose pid
# OUTDIR/campaign.pid holds has ended, or SECONDS pass. Then it prints the campaign's log and
# the running step's last lines, and packs OUTDIR (server logs cut to their last 400 lines)
# into $OUT/campaign.tgz, which the device call brings back.
# With --running in place of SECONDS it only says, by its exit status, whether it runs.
# Usage: bash benchmark/gpu/server/poll.sh OUTDIR SECONDS
set -uo pipefail
usage() { echo "poll.sh: usage: poll.sh OUTDIR SECONDS (or OUTDIR --running)" >&2; exit 2; }
[ $# -eq 2 ] || usage
out=$1 wait=$2
[[ $wait =~ ^[0-9]+$ || $wait == --running ]] || usage
if [ ! -s "$out/campaign.pid" ]; then
  echo "poll.sh: no $out/campaign.pid: start the campaign with start.sh" >&2
  exit 2
fi
read -r pid started < "$out/campaign.pid"
if ! [[ $pid =~ ^[0-9]+$ && ${started:-} =~ ^[0-9]+$ ]]; then
  echo "poll.sh: $out/campaign.pid holds no pid and start time: start the campaign with start.sh" >&2
  exit 2
fi
alive() {  # the campaign runs: its pid is no zombie and started when start.sh saw it start
  local stat rest
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
  rest=${stat##*) }
  [ "$(echo "$rest" | cut -d' ' -f1)" != Z ] && [ "$(echo "$rest" | cut -d' ' -f20)" = "$started" ]
}
if [ "$wait" = --running ]; then alive; exit; fi  # exit 0: it runs
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
