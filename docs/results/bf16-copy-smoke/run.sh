#!/bin/bash
# The copy task's smoke preset (default attention) in float32 and in bf16, seeds 0-2, one after another.
# Run from the repository root: bash docs/results/bf16-copy-smoke/run.sh
set -e
out=docs/results/bf16-copy-smoke
{ echo "commit $(git rev-parse --short HEAD), $(date -u +%FT%TZ), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"; } > $out/run.log
for seed in 0 1 2; do
  for precision in float32 bf16; do
    start=$(date +%s)
    OPENBLAS_CORETYPE=Haswell build/tapestry copy-task --preset smoke --seed $seed --precision $precision --json > $out/seed$seed-$precision.json 2>/dev/null
    echo "seed $seed $precision: $(( $(date +%s) - start )) s" >> $out/run.log
  done
done
