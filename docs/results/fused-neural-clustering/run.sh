#!/usr/bin/env bash
# Neural clustering's blocks fused (fused_attention_ends, the default) against composed
# (neural-clustering:fused=0), in one run on one machine: the classifier's and the speech recogniser's
# training steps (`tapestry bench train --model classifier|speech`), the translation model's
# (`tapestry bench translate`, neural clustering in the encoder), and one attention layer
# (`tapestry bench attention`); then the classifier's fused step profiled op by op. Usage, from the
# repository root, on a quiet machine:
#   docs/results/fused-neural-clustering/run.sh TAPESTRY OUT_DIR
set -euo pipefail
tapestry=$1
out=$2
types=neural-clustering:fused=0,neural-clustering
mkdir -p "$out"
{
  echo "commit: $("$tapestry" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p')"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "$("$tapestry" version | grep '^cpu kernels')"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/run.log"
run() {  # run NAME ARGS...: one benchmark, its JSON as OUT/NAME.json
  local name=$1
  shift
  echo "command: $tapestry $* --json $out/$name.json" >> "$out/run.log"
  "$tapestry" "$@" --json "$out/$name.json" >> "$out/run.log" 2>&1
}
for model in classifier speech; do
  run "$model" bench train --device cpu --model "$model" --types "full,$types" --repeats 5 --warmup 1
done
run translate bench translate --device cpu --types "$types" --repeats 3 --warmup 1
run attention bench attention --device cpu --lengths 1024,2048,4096 --types "full,$types" --repeats 3
run classifier-profile bench train --device cpu --model classifier --types neural-clustering --repeats 2 --warmup 1 \
  --profile "$out/classifier-profile.txt"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
