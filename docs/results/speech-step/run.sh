#!/usr/bin/env bash
# The speech recogniser's training step (asr's default preset, full attention, 2 threads) with two
# programs, before and after changes to its kernels (docs/PERFORMANCE.md names the commits of each
# run: cpu-2026-11-29/ compared 0e2cafa and 5da330c, cpu-2026-11-29-b/ b1db436 and c55eaf5,
# cpu-2026-11-29-c/ b1db436 and 084e552, cpu-2026-11-29-d/ 084e552 and 428ba5b, cpu-2026-11-30/
# 428ba5b and 5233797, cpu-2026-11-30-b/ 5233797 and 135c1a2).
# Six rounds, each the before program then the after program, float32 then bf16; then each program's
# op-by-op profile (float32), twice, alternating.
# Usage, from the repository root, on a quiet machine:
#   docs/results/speech-step/run.sh BEFORE AFTER OUT_DIR
set -euo pipefail
before=$1
after=$2
out=$3
mkdir -p "$out"
commit() { "$1" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p'; }
cmd="bench train --device cpu --model speech --types full --repeats 20 --warmup 2"
{
  echo "before: $before (commit $(commit "$before"))"
  echo "after: $after (commit $(commit "$after"))"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  "$after" version | grep -E '^cpu (kernels|float32|bfloat16)' || true
  echo "command: TAPESTRY $cmd --precision PRECISION --json OUT"
} > "$out/run.log"
for round in 1 2 3 4 5 6; do
  for precision in float32 bf16; do
    for side in before after; do
      echo "== round $round, $side, $precision, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
      # shellcheck disable=SC2086
      "${!side}" $cmd --precision "$precision" --json "$out/$side-$precision-$round.json" >> "$out/run.log" 2>&1
    done
  done
done
for round in 1 2; do
  for side in before after; do
    echo "== profile $round, $side, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
    # shellcheck disable=SC2086
    "${!side}" $cmd --profile "$out/profile-$side-$round.txt" >> "$out/run.log" 2>&1
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
