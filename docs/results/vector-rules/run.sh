#!/usr/bin/env bash
# Before and after the optimizers' update rules (optim/apply_rule.h) ran in vector registers: the
# copy task's training step (L = 31 and 63), the speech recogniser's and the classifier's (`bench
# train`, full attention, float32, 2 threads, Adam), the two programs alternating, two rounds; then
# each program's profile of the copy task's step at L = 31, whose "(outside ops)" row holds the
# optimizer's step. Usage, from the repository root, on a quiet machine:
#   docs/results/vector-rules/run.sh BEFORE AFTER OUT_DIR
set -euo pipefail
before=$1
after=$2
out=$3
mkdir -p "$out"
commit() { "$1" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p'; }
copy="bench train --device cpu --model copy --copy-lengths 31,63 --types full --repeats 5 --warmup 1"
speech="bench train --device cpu --model speech --types full --repeats 10 --warmup 1"
classifier="bench train --device cpu --model classifier --types full --repeats 3 --warmup 1"
{
  echo "before: $before (commit $(commit "$before"))"
  echo "after: $after (commit $(commit "$after"))"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "$("$after" version | grep '^cpu ')"
  echo "commands: TAPESTRY $copy; TAPESTRY $speech; TAPESTRY $classifier (each --json OUT)"
} > "$out/run.log"
for round in 1 2; do
  for side in before after; do
    bin=${!side}
    echo "== round $round, $side, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
    for name in copy speech classifier; do
      # shellcheck disable=SC2086
      "$bin" ${!name} --json "$out/$name-$side-$round.json" >> "$out/run.log" 2>&1
    done
  done
done
for side in before after; do
  "${!side}" bench train --device cpu --model copy --copy-lengths 31 --types full --repeats 5 --warmup 1 \
    --profile "$out/profile-copy-$side.txt" >> "$out/run.log" 2>&1
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
