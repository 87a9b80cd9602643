#!/usr/bin/env bash
# What a training step's forward keeps for its backward, float32 against --precision bf16: `tapestry
# bench translate` (the small preset, three encoder attentions) and `bench train` (the copy task at
# L = 31 and 63, full and improved-clustered; the classifier and the speech recogniser, full), each
# row's `activation_bytes` (act MiB) and peak. Usage, from the repository root:
#   docs/results/bf16-activations/run.sh TAPESTRY OUT_DIR
set -euo pipefail
tapestry=$1
out=$2
mkdir -p "$out"
{
  echo "commit: $("$tapestry" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p')"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  "$tapestry" version | grep -E '^cpu (kernels|bfloat16)' || true
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/run.log"
for precision in float32 bf16; do
  for command in "bench translate --device cpu --repeats 2 --warmup 1" \
                 "bench train --device cpu --model copy --copy-lengths 31,63 --repeats 3 --warmup 1" \
                 "bench train --device cpu --model classifier --types full --repeats 2 --warmup 1" \
                 "bench train --device cpu --model speech --types full --repeats 3 --warmup 1"; do
    model=$(echo "$command" | sed -n 's/.*--model \([a-z]*\).*/-\1/p')
    name=$(echo "$command" | awk '{print $2}')$model
    echo "command: $tapestry $command --precision $precision --json $out/$name-$precision.json" >> "$out/run.log"
    # shellcheck disable=SC2086
    "$tapestry" $command --precision "$precision" --json "$out/$name-$precision.json" >> "$out/run.log" 2>&1
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
