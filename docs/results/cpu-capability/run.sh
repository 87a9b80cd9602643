#!/usr/bin/env bash
# Fused attention's tile kernels compiled for the x86-64 baseline against AVX-512 (core/cpu_capability.h),
# in one run on one machine: `tapestry bench train --model classifier|speech` and `tapestry bench
# attention` under TAPESTRY_CPU_CAPABILITY=baseline and then with the CPU's own capability, the two
# alternating, and the PyTorch peer of each training step once (bench/peers/train.py --like). Usage,
# from the repository root, on a quiet machine, with Debian's python3-torch:
#   docs/results/cpu-capability/run.sh TAPESTRY OUT_DIR
set -euo pipefail
tapestry=$1
out=$2
python=${PYTHON:-/usr/bin/python3}
types=full,improved-clustered:clusters=15,topk=32,neural-clustering
mkdir -p "$out"
{
  echo "commit: $("$tapestry" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p')"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "$("$tapestry" version | grep '^cpu kernels')"
  echo "torch: $("$python" -c 'import torch; print(torch.__version__)')"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/run.log"
run() {  # run CAPABILITY NAME ARGS...: one benchmark under one capability, its JSON as OUT/NAME-CAPABILITY.json
  local capability=$1 name=$2
  shift 2
  echo "command: TAPESTRY_CPU_CAPABILITY=$capability $tapestry $* --json $out/$name-$capability.json" >> "$out/run.log"
  TAPESTRY_CPU_CAPABILITY=$capability "$tapestry" "$@" --json "$out/$name-$capability.json" >> "$out/run.log" 2>&1
}
supported=$("$tapestry" version | sed -n 's/^cpu kernels: .*(this CPU has \([a-z0-9]*\);.*/\1/p')
for model in classifier speech; do
  for capability in baseline "$supported"; do
    run "$capability" "$model" bench train --device cpu --model "$model" --types "$types" --repeats 5 --warmup 1
  done
  echo "command: $python bench/peers/train.py --like $out/$model-$supported.json --json $out/$model-torch.json" \
    >> "$out/run.log"
  "$python" bench/peers/train.py --like "$out/$model-$supported.json" --json "$out/$model-torch.json" >> "$out/run.log" 2>&1
done
for capability in baseline "$supported"; do
  run "$capability" attention bench attention --device cpu --lengths 1024,2048,4096 --types full --repeats 3
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
