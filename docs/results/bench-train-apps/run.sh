#!/usr/bin/env bash
# Each app's training step against its bound on the CPU, beside PyTorch's: `tapestry bench train
# --model classifier|speech` (classify's and asr's models at their default presets), then the PyTorch
# peer bench/peers/train.py with --like (the same model, device, repeats and threads). Usage, from the
# repository root, on a quiet machine, with Debian's python3-torch:
#   docs/results/bench-train-apps/run.sh TAPESTRY OUT_DIR
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
  echo "torch: $("$python" -c 'import torch; print(torch.__version__)')"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/run.log"
for model in classifier speech; do
  command="bench train --device cpu --model $model --types $types --repeats 5 --warmup 1 --json $out/$model.json"
  echo "command: $tapestry $command" >> "$out/run.log"
  # shellcheck disable=SC2086
  "$tapestry" $command >> "$out/run.log" 2>&1
  echo "command: $python bench/peers/train.py --like $out/$model.json --json $out/$model-torch.json" >> "$out/run.log"
  "$python" bench/peers/train.py --like "$out/$model.json" --json "$out/$model-torch.json" >> "$out/run.log" 2>&1
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
