#!/usr/bin/env bash
# Before and after two changes to the linear layer's CPU path (ops/matmul.cpp, ops/reduce.cpp): the
# bias added by each thread to its rows of the output right after its product (it had been copied
# over the whole output first), and the bias gradient's column sums in one block of columns per
# thread, compiled for the CPU's vector width (they had run on one thread in SSE2 below 512
# columns). Each app's training step (`bench train`: the speech recogniser, the copy task at L = 31
# and 63, the classifier; `bench translate`: the translation model at its small preset), full
# attention, float32, 2 threads; the two programs alternate, two rounds; then each program's
# op-by-op profile of the speech step. Usage, from the repository root, on a quiet machine:
#   docs/results/bias-in-place/run.sh BEFORE AFTER OUT_DIR
set -euo pipefail
before=$1
after=$2
out=$3
mkdir -p "$out"
commit() { "$1" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p'; }
speech="bench train --device cpu --model speech --types full --repeats 10 --warmup 1"
copy="bench train --device cpu --model copy --copy-lengths 31,63 --types full --repeats 5 --warmup 1"
classifier="bench train --device cpu --model classifier --types full --repeats 3 --warmup 1"
translate="bench translate --device cpu --types full --repeats 3 --warmup 1"
{
  echo "before: $before (commit $(commit "$before"))"
  echo "after: $after (commit $(commit "$after"))"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "$("$after" version | grep '^cpu ')"
  echo "commands: TAPESTRY $speech; TAPESTRY $copy; TAPESTRY $classifier; TAPESTRY $translate (each --json OUT)"
} > "$out/run.log"
for round in 1 2; do
  for side in before after; do
    bin=${!side}
    echo "== round $round, $side, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
    for name in speech copy classifier translate; do
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
