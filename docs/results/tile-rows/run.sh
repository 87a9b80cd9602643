#!/usr/bin/env bash
# Before and after fused attention's tile products took taller AVX-512 register blocks for narrow
# outputs (ops/tile_gemm.cpp: 12 rows × 16 columns, 8 × 32, where every width had 6 rows): the
# speech recogniser's step (`bench train --model speech`, 4 heads × 16, full attention), the copy
# task's (L = 31, 63) and one full-attention layer (`bench attention`, 6 heads × 64, N = 1024, 2048:
# its products are 64 wide and keep their blocks, a control), float32, 2 threads; then each program's
# op-by-op profile of the speech step. The two programs alternate, two rounds. Usage, from the
# repository root, on a quiet machine:
#   docs/results/tile-rows/run.sh BEFORE AFTER OUT_DIR
set -euo pipefail
before=$1
after=$2
out=$3
mkdir -p "$out"
commit() { "$1" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p'; }
speech="bench train --device cpu --model speech --types full --repeats 10 --warmup 1"
copy="bench train --device cpu --model copy --copy-lengths 31,63 --types full --repeats 5 --warmup 1"
layer="bench attention --device cpu --lengths 1024,2048 --types full --repeats 3"
{
  echo "before: $before (commit $(commit "$before"))"
  echo "after: $after (commit $(commit "$after"))"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "$("$after" version | grep '^cpu ')"
  echo "commands: TAPESTRY $speech; TAPESTRY $copy; TAPESTRY $layer (each --json OUT)"
} > "$out/run.log"
for round in 1 2; do
  for side in before after; do
    bin=${!side}
    echo "== round $round, $side, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
    for name in speech copy layer; do
      # shellcheck disable=SC2086
      "$bin" ${!name} --json "$out/$name-$side-$round.json" >> "$out/run.log" 2>&1
    done
  done
done
for side in before after; do
  # shellcheck disable=SC2086
  "${!side}" $speech --profile "$out/profile-speech-$side.txt" >> "$out/run.log" 2>&1
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
