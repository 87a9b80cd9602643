#!/usr/bin/env bash
# Before and after the CTC loss in float32 on the CPU ran each frame's row of α and β vectorised over
# the positions (ops/ctc.cpp, ops/fast_exp.h): the speech recogniser's step (30 utterances of 65
# frames after stacking, 32 target phonemes: 65 positions), float32, 2 threads; the two programs
# alternate, three rounds; then each program's op-by-op profile of the step.
# Usage, from the repository root, on a quiet machine:
#   docs/results/ctc-rows/run.sh BEFORE AFTER OUT_DIR
set -euo pipefail
before=$1
after=$2
out=$3
mkdir -p "$out"
commit() { "$1" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p'; }
speech="bench train --device cpu --model speech --types full --repeats 10 --warmup 1"
{
  echo "before: $before (commit $(commit "$before"))"
  echo "after: $after (commit $(commit "$after"))"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "$("$after" version | grep '^cpu ')"
  echo "command: TAPESTRY $speech --json OUT"
} > "$out/run.log"
for round in 1 2 3; do
  for side in before after; do
    bin=${!side}
    echo "== round $round, $side, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
    # shellcheck disable=SC2086
    "$bin" $speech --json "$out/speech-$side-$round.json" >> "$out/run.log" 2>&1
  done
done
for side in before after; do
  # shellcheck disable=SC2086
  "${!side}" $speech --profile "$out/profile-speech-$side.txt" >> "$out/run.log" 2>&1
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
