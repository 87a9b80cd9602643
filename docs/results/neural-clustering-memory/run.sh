#!/usr/bin/env bash
# Before and after a change to what neural clustering keeps for its backward: the peak memory and
# time of one layer (`bench attention`, N = 1024, 2048, 4096) and of the classifier's and translation
# model's steps (`bench train --model classifier`, `bench translate`), neural-clustering beside full,
# float32, 2 threads. The two programs alternate, two rounds. docs/PERFORMANCE.md names the change
# each run measured (its folder here: kept-, rows-, unsorted-, cosine-, own-centroid-, xw-DATE). Usage, from
# the repository root, on a quiet machine:
#   docs/results/neural-clustering-memory/run.sh BEFORE AFTER OUT_DIR
set -euo pipefail
before=$1
after=$2
out=$3
mkdir -p "$out"
commit() { "$1" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p'; }
layer="bench attention --device cpu --lengths 1024,2048,4096 --types full,neural-clustering --repeats 3"
classifier="bench train --device cpu --model classifier --types full,neural-clustering --repeats 3 --warmup 1"
translate="bench translate --device cpu --types neural-clustering --repeats 3 --warmup 1"
{
  echo "before: $before (commit $(commit "$before"))"
  echo "after: $after (commit $(commit "$after"))"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "$("$after" version | grep '^cpu ')"
  echo "commands: TAPESTRY $layer; TAPESTRY $classifier; TAPESTRY $translate (each --json OUT)"
} > "$out/run.log"
for round in 1 2; do
  for side in before after; do
    bin=${!side}
    echo "== round $round, $side, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
    for name in layer classifier translate; do
      # shellcheck disable=SC2086
      "$bin" ${!name} --json "$out/$name-$side-$round.json" >> "$out/run.log" 2>&1
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
