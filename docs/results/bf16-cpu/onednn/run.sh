#!/bin/bash
# float32 and bf16 training steps on the CPU, one after another on a quiet machine, with bfloat16
# products on oneDNN (ops/bf16_gemm.h); the same commands as ../run.sh, whose tables are the before.
# Run from this folder with a build of the commit under test in ../../../../build.
set -e
tapestry=../../../../build/tapestry
{ date -u +%FT%TZ; uptime; $tapestry version; grep -m1 "model name" /proc/cpuinfo; } > run.log
for p in float32 bf16; do
  OPENBLAS_CORETYPE=Haswell $tapestry bench train --types full,improved-clustered:clusters=15,topk=32 \
    --copy-lengths 31,63 --precision $p --repeats 5 --json train-$p.json 2>&1 | tail -5 | tee -a run.log
done
for p in float32 bf16; do
  OPENBLAS_CORETYPE=Haswell $tapestry bench translate --precision $p --repeats 3 --json translate-$p.json 2>&1 | tail -4 | tee -a run.log
done
uptime | tee -a run.log
