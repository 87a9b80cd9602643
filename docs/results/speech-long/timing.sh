#!/usr/bin/env bash
# The forward time of each seed-0 model of run.sh on the speech-long test split, measured again:
# three rounds, each evaluating every model in turn in a fresh process (one evaluation's time moves
# with the machine's load: the minimum of the three is the figure to read).
# Usage, from the repository root, after run.sh, on a quiet machine:
#   docs/results/speech-long/timing.sh TAPESTRY OUT_DIR CHECKPOINT_DIR
set -euo pipefail
tapestry=$1
out=$2
ckpt=$3
data=${TAPESTRY_DATA:-$HOME/.cache/tapestry/data}/speech-long
runs=(full clustered-25 clustered-50 improved-clustered-25 improved-clustered-50)
{
  echo "program: $tapestry ($("$tapestry" version | head -1))"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "command: TAPESTRY asr eval --resume CKPT --data DATA --eval-split test --json"
} > "$out/timing.log"
for round in 1 2 3; do
  for run in "${runs[@]}"; do
    echo "== round $round, $run-0, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/timing.log"
    "$tapestry" asr eval --resume "$ckpt/$run-0.ckpt" --data "$data" --eval-split test --json \
      > "$out/timing-$run-$round.json" 2>> "$out/timing.log"
  done
done
