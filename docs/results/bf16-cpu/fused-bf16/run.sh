#!/bin/bash
# float32 and bf16 training steps on the CPU, one after another on a quiet machine.
# Run from this folder with a build of the commit under test in ../../../../build.
set -e
uptime > run.log
for p in float32 bf16; do
  OPENBLAS_CORETYPE=Haswell ../../../../build/tapestry bench train --types full,improved-clustered:clusters=15,topk=32 \
    --copy-lengths 31,63 --precision $p --repeats 5 --json train-$p.json 2>&1 | tail -5 | tee -a run.log
done
for p in float32 bf16; do
  OPENBLAS_CORETYPE=Haswell ../../../../build/tapestry bench translate --precision $p --repeats 3 --json translate-$p.json 2>&1 | tail -4 | tee -a run.log
done
uptime | tee -a run.log
