#!/usr/bin/env bash
# Fused attention's tile products on BLAS (before) against ops/tile_gemm's kernels (after): one layer
# (`tapestry bench attention`, 6 heads of 64, feed-forward 1536, batch 1, forward + backward) with full
# attention at N = 1024, 2048 and 4096, and the classifier's training step (`bench train --model
# classifier`, full attention, 8 × 2048), the two binaries alternating, two rounds, then each
# profiled op by op at N = 2048. Usage, from the repository root, on a quiet machine:
#   docs/results/tile-gemm/run.sh BEFORE AFTER OUT_DIR
# (BEFORE here: the tapestry program built at 797e805 with ops/attention.cpp as it was at c02ddcd,
# i.e. the tiles on OpenBLAS; AFTER: 797e805 as committed.)
set -euo pipefail
before=$1
after=$2
out=$3
mkdir -p "$out"
commit() { "$1" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p'; }
attention="bench attention --device cpu --lengths 1024,2048,4096 --types full --repeats 3"
train="bench train --device cpu --model classifier --types full --repeats 3 --warmup 1"
{
  echo "before: $before (commit $(commit "$before"))"
  echo "after: $after (commit $(commit "$after"))"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "$("$after" version | grep '^cpu kernels')"
  echo "commands: TAPESTRY $attention --json OUT; TAPESTRY $train --json OUT"
} > "$out/run.log"
for round in 1 2; do
  for side in before after; do
    bin=${!side}
    echo "== round $round, $side, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
    # shellcheck disable=SC2086
    "$bin" $attention --json "$out/attention-$side-$round.json" >> "$out/run.log" 2>&1
    # shellcheck disable=SC2086
    "$bin" $train --json "$out/classifier-$side-$round.json" >> "$out/run.log" 2>&1
  done
done
for side in before after; do
  bin=${!side}
  # shellcheck disable=SC2086
  "$bin" bench attention --device cpu --lengths 2048 --types full --repeats 3 \
    --profile "$out/profile-full-2048-$side.txt" >> "$out/run.log" 2>&1
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
