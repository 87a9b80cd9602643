#!/usr/bin/env bash
# Before and after improved-clustered's exact part (eq. 13 and 16) became one op,
# clustered_sparse_attention, that holds none of its N × k tensors for the backward, and the sparse
# dot products summed in vector lanes (commits a91b28d and b2ad3cb): one layer
# (`bench attention`, 6 heads × 64, N = 1024, 2048 and 4096, forward and backward) and the copy task's
# step with improved-clustered (L = 31 and 127), float32, 2 threads; the two programs alternate, two
# rounds; then the after program's op-by-op profile of the layer at N = 4096.
# Usage, from the repository root, on a quiet machine:
#   docs/results/sparse-attention/run.sh BEFORE AFTER OUT_DIR
set -euo pipefail
before=$1
after=$2
out=$3
mkdir -p "$out"
commit() { "$1" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p'; }
layer="bench attention --device cpu --lengths 1024,2048,4096 --types full,improved-clustered --repeats 3"
copy="bench train --device cpu --model copy --copy-lengths 31,127 --types improved-clustered:clusters=15,topk=32 --repeats 5 --warmup 1"
{
  echo "before: $before (commit $(commit "$before"))"
  echo "after: $after (commit $(commit "$after"))"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "$("$after" version | grep '^cpu ')"
  echo "commands: TAPESTRY $layer; TAPESTRY $copy (each --json OUT)"
} > "$out/run.log"
for round in 1 2; do
  for side in before after; do
    bin=${!side}
    echo "== round $round, $side, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
    for name in layer copy; do
      # shellcheck disable=SC2086
      "$bin" ${!name} --json "$out/$name-$side-$round.json" >> "$out/run.log" 2>&1
    done
  done
done
"$after" bench attention --device cpu --lengths 4096 --types improved-clustered --repeats 1 --warmup 0 \
  --profile "$out/profile-layer-after.txt" >> "$out/run.log" 2>&1
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
