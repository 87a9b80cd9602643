#!/bin/bash
# One attention layer, forward + backward, in float32 and in bf16, N = 1024 and 4096, on the CPU.
# Run from this folder with a build of the commit under test in ../../../../build.
set -e
uptime > run.log
for p in float32 bf16; do
  OPENBLAS_CORETYPE=Haswell ../../../../build/tapestry bench attention --lengths 1024,4096 \
    --types full,improved-clustered,neural-clustering --repeats 3 --precision $p --json attention-$p.json 2>&1 | tail -7 | tee -a run.log
done
uptime | tee -a run.log
