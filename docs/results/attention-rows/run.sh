#!/usr/bin/env bash
# Two programs, before and after a change to fused attention on the CPU (ops/attention.cpp,
# ops/tile_gemm.cpp; docs/PERFORMANCE.md names each run's commits: cpu-2026-11-29/ its softmax's
# masked last vector, cpu-2026-11-29-interleaved/ its rows four at a time, cpu-2026-11-29-blocks/ the
# tile products' addressing of A, cpu-2026-11-29-backward/ that and the backward's one parallel
# region): the speech recogniser's step (4 heads × 16, 65 positions), one
# full-attention layer (`bench attention`, 6 heads × 64, N = 1024 and 2048, forward and backward) and
# the copy task's step (6 heads × 32, L = 31 and 63), float32, 2 threads; the two programs alternate,
# three rounds; then each program's op-by-op profile of the speech step.
# Usage, from the repository root, on a quiet machine:
#   docs/results/attention-rows/run.sh BEFORE AFTER OUT_DIR
set -euo pipefail
before=$1
after=$2
out=$3
mkdir -p "$out"
commit() { "$1" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p'; }
layer="bench attention --device cpu --lengths 1024,2048 --types full --repeats 3"
speech="bench train --device cpu --model speech --types full --repeats 10 --warmup 1"
copy="bench train --device cpu --model copy --copy-lengths 31,63 --types full --repeats 5 --warmup 1"
{
  echo "before: $before (commit $(commit "$before"))"
  echo "after: $after (commit $(commit "$after"))"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "$("$after" version | grep '^cpu ')"
  echo "commands: TAPESTRY $layer; TAPESTRY $speech; TAPESTRY $copy (each --json OUT)"
} > "$out/run.log"
for round in 1 2 3; do
  for side in before after; do
    bin=${!side}
    echo "== round $round, $side, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
    for name in speech layer copy; do
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
