#!/usr/bin/env bash
# Before and after improved-clustered took A^c V, its top keys and their weights from fused attention
# with each centroid's log-sum-exp (93c24f7; fused_attention_lse, ops/attention.h), holding no C × S
# tensor and one copy of q, k and v. One layer (`tapestry bench attention`, 6 heads of 64, feed-forward
# 1536, batch 1, forward + backward) with full and improved-clustered attention at N = 1024, 2048,
# 4096; the classifier's and the copy task's (L = 63) training steps with improved-clustered (`bench
# train`); then each binary's op-by-op profile of the layer at N = 4096, whose "MiB peak" column is
# each op's part of the peak. The two binaries alternate, two rounds. Usage, from the repository
# root, on a quiet machine:
#   docs/results/improved-clustered-lse/run.sh BEFORE AFTER OUT_DIR
# (BEFORE here: the tapestry program at f137d4b; AFTER: 93c24f7.)
set -euo pipefail
before=$1
after=$2
out=$3
mkdir -p "$out"
commit() { "$1" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p'; }
improved=improved-clustered:clusters=15,topk=32
attention="bench attention --device cpu --lengths 1024,2048,4096 --types full,improved-clustered --repeats 3"
classifier="bench train --device cpu --model classifier --types $improved --repeats 3 --warmup 1"
copy="bench train --device cpu --model copy --copy-lengths 63 --types $improved --repeats 5 --warmup 1"
profile="bench attention --device cpu --lengths 4096 --types improved-clustered --repeats 1"
{
  echo "before: $before (commit $(commit "$before"))"
  echo "after: $after (commit $(commit "$after"))"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "$("$after" version | grep '^cpu kernels')"
  echo "commands: TAPESTRY $attention --json OUT; TAPESTRY $classifier --json OUT; TAPESTRY $copy --json OUT;"
  echo "  TAPESTRY $profile --profile OUT"
} > "$out/run.log"
for round in 1 2; do
  for side in before after; do
    bin=${!side}
    echo "== round $round, $side, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
    # shellcheck disable=SC2086
    "$bin" $attention --json "$out/attention-$side-$round.json" >> "$out/run.log" 2>&1
    # shellcheck disable=SC2086
    "$bin" $classifier --json "$out/classifier-$side-$round.json" >> "$out/run.log" 2>&1
    # shellcheck disable=SC2086
    "$bin" $copy --json "$out/copy-$side-$round.json" >> "$out/run.log" 2>&1
  done
done
for side in before after; do
  # shellcheck disable=SC2086
  "${!side}" $profile --profile "$out/profile-$side-N4096.txt" >> "$out/run.log" 2>&1
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
