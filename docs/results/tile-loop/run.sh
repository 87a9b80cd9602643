#!/usr/bin/env bash
# Before and after fused attention's tile products (ops/tile_gemm.cpp) kept their strides and row
# pointers in locals and took two steps of the sum a pass: one full-attention layer (`bench
# attention`, 6 heads × 64, N = 1024 and 2048, forward and backward), the speech recogniser's step (4
# heads × 16) and the copy task's (6 heads × 32, L = 31 and 63), float32, 2 threads; the two
# programs alternate, three rounds; then each program's op-by-op profile of the layer at N = 2048.
# Usage, from the repository root, on a quiet machine:
#   docs/results/tile-loop/run.sh BEFORE AFTER OUT_DIR
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
    for name in layer speech copy; do
      # shellcheck disable=SC2086
      "$bin" ${!name} --json "$out/$name-$side-$round.json" >> "$out/run.log" 2>&1
    done
  done
done
for side in before after; do
  "${!side}" bench attention --device cpu --lengths 2048 --types full --repeats 3 \
    --profile "$out/profile-layer-$side.txt" >> "$out/run.log" 2>&1
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
