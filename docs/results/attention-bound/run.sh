#!/usr/bin/env bash
# One attention layer against its bound: `tapestry bench attention` (6 heads of 64, feed-forward
# 1536, batch 1, forward + backward) for full attention and the clustered kinds at N = 1024, 2048 and
# 4096, its matmul and attention FLOPs at the rate of a 2048³ float32 matmul measured in the same run.
# Usage, from the repository root, on a quiet machine:
#   docs/results/attention-bound/run.sh TAPESTRY OUT_DIR
set -euo pipefail
tapestry=$1
out=$2
mkdir -p "$out"
command="bench attention --device cpu --lengths 1024,2048,4096 --types full,clustered,improved-clustered,neural-clustering --repeats 3 --json $out/attention.json"
{
  echo "commit: $("$tapestry" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p')"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "$("$tapestry" version | grep '^cpu kernels')"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "command: $tapestry $command"
} > "$out/run.log"
# shellcheck disable=SC2086
"$tapestry" $command >> "$out/run.log" 2>&1
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
# Then full attention at N = 2048 profiled op by op (forward and backward apart, GFLOP/s per op).
command="bench attention --device cpu --lengths 2048 --types full --repeats 3 --profile $out/profile-full-2048.txt"
echo "command: $tapestry $command" >> "$out/run.log"
# shellcheck disable=SC2086
"$tapestry" $command >> "$out/run.log" 2>&1
