#!/bin/bash
# The translation step in float32 and bf16 after cross_entropy read bfloat16 logits in its kernels
# (no float32 copy of them), the rest as ../onednn/run.sh. Run from this folder with a build of the
# commit under test in ../../../../build, on a quiet machine.
set -e
tapestry=../../../../build/tapestry
{ date -u +%FT%TZ; uptime; $tapestry version; grep -m1 "model name" /proc/cpuinfo; } > run.log
for p in float32 bf16; do
  OPENBLAS_CORETYPE=Haswell $tapestry bench translate --precision $p --repeats 3 --json translate-$p.json 2>&1 | tail -4 | tee -a run.log
done
uptime | tee -a run.log
