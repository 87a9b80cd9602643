#!/usr/bin/env bash
# Where one attention layer's peak memory lies at N = 4096, full against improved-clustered
# (clusters=100, topk=32, the bench's defaults): each type's op-by-op profile of one forward and
# backward, whose last column is each op's part of the blocks held at the peak. Float32, 2 threads.
# Usage, from the repository root:
#   docs/results/improved-clustered-peak/run.sh TAPESTRY OUT_DIR
set -euo pipefail
bin=$1
out=$2
mkdir -p "$out"
{
  echo "program: $bin ($("$bin" version | head -1))"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
} > "$out/run.log"
for type in full improved-clustered; do
  cmd="bench attention --device cpu --lengths 4096 --types $type --repeats 1 --warmup 0"
  echo "command: TAPESTRY $cmd --json $out/$type.json --profile $out/profile-$type.txt" >> "$out/run.log"
  # shellcheck disable=SC2086
  "$bin" $cmd --json "$out/$type.json" --profile "$out/profile-$type.txt" >> "$out/run.log" 2>&1
done
