#!/usr/bin/env bash
# Before and after three changes to the CPU training step: layer norm's row sums in float64 vector
# lanes with dweight / dbias in the same pass (ops/norm.cpp), relu and dropout as one op in the
# feed-forward (relu_dropout, ops/dropout.h), and float32 products through oneDNN's GEMM
# (ops/onednn_gemm.h). Three programs alternate, two rounds: BEFORE; AFTER with
# TAPESTRY_CPU_GEMM=openblas (the first two changes alone); AFTER as built (all three). Each runs
# the copy task's step (L = 31, 63), the speech recogniser's and the classifier's (`bench train`,
# their apps' default presets), the translation model's small step (`bench translate`) and one
# full-attention layer (`bench attention`, N = 1024, 2048), all full attention, float32, 2 threads;
# then each program's op-by-op profile of the copy task's step at L = 63. Usage, from the
# repository root, on a quiet machine:
#   docs/results/cpu-step-onednn/run.sh BEFORE AFTER OUT_DIR
set -euo pipefail
before=$1
after=$2
out=$3
mkdir -p "$out"
commit() { "$1" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p'; }
copy="bench train --device cpu --model copy --copy-lengths 31,63 --types full --repeats 5 --warmup 1"
speech="bench train --device cpu --model speech --types full --repeats 5 --warmup 1"
classifier="bench train --device cpu --model classifier --types full --repeats 3 --warmup 1"
translate="bench translate --device cpu --types full --repeats 3 --warmup 1"
layer="bench attention --device cpu --lengths 1024,2048 --types full --repeats 3"
{
  echo "before: $before (commit $(commit "$before"))"
  echo "after: $after (commit $(commit "$after"))"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "$("$after" version | grep '^cpu ')"
  echo "commands: TAPESTRY $copy; TAPESTRY $speech; TAPESTRY $classifier; TAPESTRY $translate; TAPESTRY $layer"
  echo "(each --json OUT; 'openblas' is AFTER run with TAPESTRY_CPU_GEMM=openblas)"
} > "$out/run.log"
run() {  # SIDE BINARY [ENV...]: every command once
  local side=$1 bin=$2 round=$3
  shift 3
  echo "== round $round, $side, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
  for name in copy speech classifier translate layer; do
    # shellcheck disable=SC2086
    env "$@" "$bin" ${!name} --json "$out/$name-$side-$round.json" >> "$out/run.log" 2>&1
  done
}
for round in 1 2; do
  run before "$before" "$round"
  run openblas "$after" "$round" TAPESTRY_CPU_GEMM=openblas
  run after "$after" "$round"
done
for side in before openblas after; do
  bin=$after
  [ "$side" = before ] && bin=$before
  gemm=()
  [ "$side" = openblas ] && gemm=(TAPESTRY_CPU_GEMM=openblas)
  env "${gemm[@]}" "$bin" bench train --device cpu --model copy --copy-lengths 63 --types full --repeats 5 \
    --warmup 1 --profile "$out/profile-copy-L63-$side.txt" >> "$out/run.log" 2>&1
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
