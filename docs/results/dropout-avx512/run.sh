#!/usr/bin/env bash
# Before and after dropout's mask took float32 under AVX-512 in intrinsics (ops/dropout.cpp): the
# speech recogniser's step (dropout 0.1 after attention, and relu + dropout in its feed-forwards, at
# 1950 × 64 and 1950 × 256 elements) and the copy task's step (L = 31 and 63), float32, 2 threads; the
# two programs alternate, three rounds; then each program's op-by-op profile of the speech step.
# Usage, from the repository root, on a quiet machine:
#   docs/results/dropout-avx512/run.sh BEFORE AFTER OUT_DIR
set -euo pipefail
before=$1
after=$2
out=$3
mkdir -p "$out"
commit() { "$1" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p'; }
speech="bench train --device cpu --model speech --types full --repeats 10 --warmup 1"
copy="bench train --device cpu --model copy --copy-lengths 31,63 --types full --repeats 5 --warmup 1"
{
  echo "before: $before (commit $(commit "$before"))"
  echo "after: $after (commit $(commit "$after"))"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "$("$after" version | grep '^cpu ')"
  echo "commands: TAPESTRY $speech; TAPESTRY $copy (each --json OUT)"
} > "$out/run.log"
for round in 1 2 3; do
  for side in before after; do
    bin=${!side}
    echo "== round $round, $side, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
    for name in speech copy; do
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
