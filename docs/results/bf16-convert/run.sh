#!/usr/bin/env bash
# Before and after float32 ↔ bfloat16 conversions ran in vector lanes and bf16 fused attention kept
# its copies in the heads' layout (commit 775f653): each app's training step (bench train's copy
# task at L = 31, classifier and speech recogniser, bench translate's small translation model), full
# attention, float32 and --precision bf16, 2 threads; five rounds, each round every model under the
# before program then the after program, float32 then bf16 each.
# Usage, from the repository root, on a quiet machine:
#   docs/results/bf16-convert/run.sh BEFORE AFTER OUT_DIR
set -euo pipefail
before=$1
after=$2
out=$3
mkdir -p "$out"
commit() { "$1" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p'; }
{
  echo "before: $before (commit $(commit "$before"))"
  echo "after: $after (commit $(commit "$after"))"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  "$after" version | grep -E '^cpu (kernels|float32|bfloat16)' || true
} > "$out/run.log"
for round in 1 2 3 4 5; do
  for model in speech copy classifier translate; do
    case $model in
      translate) cmd="bench translate --device cpu --types full --repeats 3 --warmup 1" ;;
      copy) cmd="bench train --device cpu --model copy --copy-lengths 31 --types full --repeats 10 --warmup 1" ;;
      *) cmd="bench train --device cpu --model $model --types full --repeats 10 --warmup 1" ;;
    esac
    for side in before after; do
      for precision in float32 bf16; do
        echo "== round $round, $model, $side, $precision, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
        echo "command: TAPESTRY $cmd --precision $precision --json $out/$model-$side-$precision-$round.json" \
          >> "$out/run.log"
        # shellcheck disable=SC2086
        "${!side}" $cmd --precision "$precision" --json "$out/$model-$side-$precision-$round.json" \
          >> "$out/run.log" 2>&1
      done
    done
  done
done
for side in before after; do
  echo "== profile, $side, bf16, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
  "${!side}" bench train --device cpu --model speech --types full --repeats 10 --warmup 1 --precision bf16 \
    --profile "$out/profile-speech-bf16-$side.txt" >> "$out/run.log" 2>&1
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
