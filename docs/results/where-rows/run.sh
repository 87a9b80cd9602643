#!/usr/bin/env bash
# Before and after `where` on the CPU (ops/elementwise.cpp) copied or filled a run whose condition is
# one value, as the padding masks of every attention layer's input are (masked_fill over rows): the
# speech recogniser's step, the translation model's (small preset) and the classifier's, full
# attention, float32, 2 threads, the two programs alternating, two rounds; then each program's
# profile of the speech step. Usage, from the repository root, on a quiet machine:
#   docs/results/where-rows/run.sh BEFORE AFTER OUT_DIR
set -euo pipefail
before=$1
after=$2
out=$3
mkdir -p "$out"
commit() { "$1" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p'; }
speech="bench train --device cpu --model speech --types full --repeats 10 --warmup 1"
translate="bench translate --device cpu --types full --repeats 3 --warmup 1"
classifier="bench train --device cpu --model classifier --types full --repeats 3 --warmup 1"
{
  echo "before: $before (commit $(commit "$before"))"
  echo "after: $after (commit $(commit "$after"))"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "$("$after" version | grep '^cpu ')"
  echo "commands: TAPESTRY $speech; TAPESTRY $translate; TAPESTRY $classifier (each --json OUT)"
} > "$out/run.log"
for round in 1 2; do
  for side in before after; do
    bin=${!side}
    echo "== round $round, $side, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
    for name in speech translate classifier; do
      # shellcheck disable=SC2086
      "$bin" ${!name} --json "$out/$name-$side-$round.json" >> "$out/run.log" 2>&1
    done
  done
done
for side in before after; do
  # shellcheck disable=SC2086
  "${!side}" $speech --profile "$out/profile-speech-$side.txt" >> "$out/run.log" 2>&1
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
