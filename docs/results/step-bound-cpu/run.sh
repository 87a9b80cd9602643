#!/usr/bin/env bash
# Each training step against its bound on the CPU: `tapestry bench train` (the copy-task model) and
# `tapestry bench translate` (the translation model's small preset), whose rows give the step's
# FLOPs, the time they take at the 2048³ matmul rate measured in the same run, and the step's time
# over it. Usage, from the repository root, on a quiet machine:
#   docs/results/step-bound-cpu/run.sh TAPESTRY OUT_DIR
set -euo pipefail
tapestry=$1
out=$2
mkdir -p "$out"
{
  echo "commit: $("$tapestry" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p')"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/run.log"
for command in "bench train --device cpu --repeats 5 --warmup 1 --json $out/train.json" \
               "bench translate --device cpu --repeats 3 --warmup 1 --json $out/translate.json"; do
  echo "command: $tapestry $command" >> "$out/run.log"
  # shellcheck disable=SC2086
  "$tapestry" $command >> "$out/run.log" 2>&1
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
