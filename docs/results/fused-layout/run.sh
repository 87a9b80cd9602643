#!/usr/bin/env bash
# Before and after fused attention on the CPU wrote its output and the gradients of q, k and v in the
# projections' layout of heads (ops/attention.cpp, in_layout_of): one full-attention layer (`bench
# attention`, N = 1024, 2048, 4096), the copy task's step (L = 31, 63), the classifier's and the
# translation model's, full attention, float32. The two binaries alternate, two rounds; then each
# binary's op-by-op profile of the copy task's step at L = 63. Usage, from the repository root, on a
# quiet machine:
#   docs/results/fused-layout/run.sh BEFORE AFTER OUT_DIR
set -euo pipefail
before=$1
after=$2
out=$3
mkdir -p "$out"
commit() { "$1" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p'; }
attention="bench attention --device cpu --lengths 1024,2048,4096 --types full --repeats 3"
copy="bench train --device cpu --model copy --copy-lengths 31,63 --types full --repeats 5 --warmup 1"
classifier="bench train --device cpu --model classifier --types full --repeats 3 --warmup 1"
translate="bench translate --device cpu --types full --repeats 3 --warmup 1"
{
  echo "before: $before (commit $(commit "$before"))"
  echo "after: $after (commit $(commit "$after"))"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "$("$after" version | grep '^cpu kernels')"
  echo "commands: TAPESTRY $attention; TAPESTRY $copy; TAPESTRY $classifier; TAPESTRY $translate (each --json OUT)"
} > "$out/run.log"
for round in 1 2; do
  for side in before after; do
    bin=${!side}
    echo "== round $round, $side, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
    for name in attention copy classifier translate; do
      # shellcheck disable=SC2086
      "$bin" ${!name} --json "$out/$name-$side-$round.json" >> "$out/run.log" 2>&1
    done
  done
done
for side in before after; do
  # shellcheck disable=SC2086
  "${!side}" bench train --device cpu --model copy --copy-lengths 63 --types full --repeats 5 \
    --profile "$out/profile-copy-L63-$side.txt" >> "$out/run.log" 2>&1
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
