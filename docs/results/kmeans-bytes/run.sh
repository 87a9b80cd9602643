#!/usr/bin/env bash
# Before and after two changes to hamming_kmeans (ops/cluster.cpp): its majorities counted eight bits
# at a time (a64bc52) and its assignment's popcounts in the POPCNT version of its function (da11a60):
# one layer with clustered and improved-clustered attention (`bench attention`, N = 1024, 2048,
# 4096), and the classifier's and the copy task's (L = 63) steps with improved-clustered (`bench
# train`); the two binaries alternate, two rounds; then each binary's op-by-op profile of the
# improved-clustered layer at N = 4096. Usage, from the repository root, on a quiet machine:
#   docs/results/kmeans-bytes/run.sh BEFORE AFTER OUT_DIR
# (BEFORE here: the program of a64bc52 built with ops/cluster.cpp as it was at 929f282, hence its
# version "a64bc52-dirty"; AFTER: aa63233.)
set -euo pipefail
before=$1
after=$2
out=$3
mkdir -p "$out"
commit() { "$1" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p'; }
improved=improved-clustered:clusters=15,topk=32
attention="bench attention --device cpu --lengths 1024,2048,4096 --types clustered,improved-clustered --repeats 3"
classifier="bench train --device cpu --model classifier --types $improved --repeats 3 --warmup 1"
copy="bench train --device cpu --model copy --copy-lengths 63 --types $improved --repeats 5 --warmup 1"
{
  echo "before: $before (commit $(commit "$before"))"
  echo "after: $after (commit $(commit "$after"))"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "$("$after" version | grep '^cpu kernels')"
  echo "commands: TAPESTRY $attention; TAPESTRY $classifier; TAPESTRY $copy (each --json OUT)"
} > "$out/run.log"
for round in 1 2; do
  for side in before after; do
    bin=${!side}
    echo "== round $round, $side, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
    for name in attention classifier copy; do
      # shellcheck disable=SC2086
      "$bin" ${!name} --json "$out/$name-$side-$round.json" >> "$out/run.log" 2>&1
    done
  done
done
for side in before after; do
  "${!side}" bench attention --device cpu --lengths 4096 --types improved-clustered --repeats 2 \
    --profile "$out/profile-improved-N4096-$side.txt" >> "$out/run.log" 2>&1
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
