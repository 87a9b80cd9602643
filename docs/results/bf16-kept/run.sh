#!/usr/bin/env bash
# Before and after four changes to what a bf16 training step keeps and spends (commits e8314b2,
# 36dcc2f, 6d988f7, aceee45): layer norm keeping x̂ in bfloat16 under autocast, attention converting a
# shared input (and the decoder its memory) to bfloat16 once, binary ops keeping an input only where
# a wanted gradient reads it, and dropout's AVX-512 kernel in bfloat16. Each model's step, float32 and
# --precision bf16: what the forward keeps for the backward (act MiB), the peak and the time, by
# docs/results/bf16-activations/run.sh (the same commands, models and rows); the before program's
# run first, then the after program's, twice.
# Usage, from the repository root, on a quiet machine:
#   docs/results/bf16-kept/run.sh BEFORE AFTER OUT_DIR
set -euo pipefail
before=$1
after=$2
out=$3
for round in 1 2; do
  docs/results/bf16-activations/run.sh "$before" "$out/before-$round"
  docs/results/bf16-activations/run.sh "$after" "$out/after-$round"
done
# The time of a bf16 step against a float32 one, the two alternating (the runs above take every
# float32 row before every bf16 one, a minute apart): the speech recogniser and the copy task at
# L = 31, full attention, five rounds, each round the before program then the after program.
commit() { "$1" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p'; }
{
  echo "before: $before (commit $(commit "$before"))"
  echo "after: $after (commit $(commit "$after"))"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  "$after" version | grep -E '^cpu (kernels|bfloat16)' || true
  echo "command: TAPESTRY bench train --device cpu --model MODEL --types full --copy-lengths 31 --repeats 20 \
--warmup 2 --precision PRECISION --json OUT"
} > "$out/time.log"
for round in 1 2 3 4 5; do
  for side in before after; do
    for precision in float32 bf16; do
      for model in speech copy; do
        cmd="bench train --device cpu --model $model --types full --copy-lengths 31 --repeats 20 --warmup 2"
        echo "== round $round, $side, $model, $precision, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/time.log"
        # shellcheck disable=SC2086
        "${!side}" $cmd --precision "$precision" --json "$out/time-$side-$model-$precision-$round.json" \
          >> "$out/time.log" 2>&1
      done
    done
  done
done
