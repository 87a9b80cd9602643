#!/usr/bin/env bash
# Training steps on the CPU before and after a change, the two binaries alternating in one run (two
# rounds), then PyTorch's translation step (float32, and bfloat16 under torch.autocast) beside them:
# `tapestry bench translate` (the translation model's small preset, all three encoder attentions) and
# `tapestry bench train` (the copy-task model at L = 31 and 63), in float32 and with --precision bf16.
# OpenBLAS with its own choice of kernels for this CPU (no OPENBLAS_CORETYPE). Usage, from the
# repository root, on a quiet machine:
#   docs/results/cpu-steps-fixes/run.sh BEFORE_TAPESTRY AFTER_TAPESTRY OUT_DIR
# cpu-2026-11-28/ ran with BEFORE a CPU build of 88728a6 (git worktree add /tmp/before 88728a6; cmake -S
# /tmp/before -B /tmp/before/build-cpu -DTAPESTRY_CUDA=OFF -DTAPESTRY_MPI=OFF; cmake --build ... --target
# tapestry_cli) and AFTER build/tapestry of 56325da (with CUDA, on a machine without a GPU). Its
# profile-*.txt and page-faults.txt came minutes later from the same two binaries (docs/PERFORMANCE.md).
set -euo pipefail
before=$1
after=$2
out=$3
mkdir -p "$out"
log="$out/run.log"
{
  echo "before: $("$before" version | head -1)"
  echo "after: $("$after" version | head -1)"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  "$after" version | tail -3
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$log"
for round in 1 2; do
  for which in before after; do
    tapestry=${!which}
    for precision in float32 bf16; do
      for bench in "translate --repeats 3" "train --types full,improved-clustered:clusters=15,topk=32 --copy-lengths 31,63 --repeats 5"; do
        name="$which-$round-${bench%% *}-$precision"
        command="bench $bench --device cpu --warmup 1 --precision $precision --json $out/$name.json"
        echo "== $name: $tapestry $command" >> "$log"
        # shellcheck disable=SC2086
        "$tapestry" $command 2>&1 | tail -5 >> "$log"
      done
    done
  done
done
for precision in float32 bf16; do
  echo "== pytorch-translate-$precision: bench/peers/translate.py --like $out/after-1-translate-$precision.json" >> "$log"
  "${BENCH_PYTHON:-/usr/bin/python3}" bench/peers/translate.py --like "$out/after-1-translate-$precision.json" \
    --json "$out/pytorch-translate-$precision.json" >> "$log" 2>&1
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$log"
