#!/usr/bin/env bash
# Before and after two changes to the attention layers, measured together: fused attention's
# exponentials with fused multiply-adds under AVX2 and AVX-512 (49e2e2f), and improved-clustered's
# eq. 17 as A^c V less its top-k part (5fdd42a). One layer (`tapestry bench attention`, 6 heads of 64,
# feed-forward 1536, batch 1, forward + backward) with full and improved-clustered attention at
# N = 1024, 2048 and 4096; the classifier's and the speech recogniser's training steps (`bench train`,
# full attention). The two binaries alternate, two rounds. Usage, from the repository root, on a quiet
# machine:
#   docs/results/fused-exp/run.sh BEFORE AFTER OUT_DIR
# (BEFORE here: the tapestry program at 797e805, fused attention's tile products already on
# ops/tile_gemm; AFTER: 0dd077c.)
set -euo pipefail
before=$1
after=$2
out=$3
mkdir -p "$out"
commit() { "$1" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p'; }
attention="bench attention --device cpu --lengths 1024,2048,4096 --types full,improved-clustered --repeats 3"
classifier="bench train --device cpu --model classifier --types full --repeats 3 --warmup 1"
speech="bench train --device cpu --model speech --types full --repeats 5 --warmup 1"
{
  echo "before: $before (commit $(commit "$before"))"
  echo "after: $after (commit $(commit "$after"))"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "$("$after" version | grep '^cpu kernels')"
  echo "commands: TAPESTRY $attention --json OUT; TAPESTRY $classifier --json OUT; TAPESTRY $speech --json OUT"
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
    "$bin" $speech --json "$out/speech-$side-$round.json" >> "$out/run.log" 2>&1
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
