#!/usr/bin/env bash
# Every app's training step against its bound and beside its PyTorch peer, one program, one run:
# the copy task (L = 31, 63), the translation model's small preset, the classifier and the speech
# recogniser (their apps' default presets), full attention, float32, 2 threads; each `tapestry bench`
# row followed by its peer (bench/peers/*.py --like: the same model, repeats and threads). Usage,
# from the repository root, on a quiet machine, with Debian's python3-torch:
#   docs/results/steps-at-head/run.sh TAPESTRY OUT_DIR
set -euo pipefail
tapestry=$1
out=$2
python=${PYTHON:-/usr/bin/python3}
mkdir -p "$out"
{
  echo "commit: $("$tapestry" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p')"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "$("$tapestry" version | grep '^cpu kernels')"
  echo "torch: $("$python" -c 'import torch; print(torch.__version__)')"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/run.log"
run() {  # NAME PEER TAPESTRY-ARGS...
  local name=$1 peer=$2
  shift 2
  echo "command: $tapestry $* --json $out/$name.json" >> "$out/run.log"
  "$tapestry" "$@" --json "$out/$name.json" >> "$out/run.log" 2>&1
  echo "command: $python bench/peers/$peer --like $out/$name.json --json $out/$name-torch.json" >> "$out/run.log"
  "$python" "bench/peers/$peer" --like "$out/$name.json" --json "$out/$name-torch.json" >> "$out/run.log" 2>&1
}
run copy train.py bench train --device cpu --model copy --copy-lengths 31,63 --types full --repeats 5 --warmup 1
run translate translate.py bench translate --device cpu --types full --repeats 3 --warmup 1
run classifier train.py bench train --device cpu --model classifier --types full --repeats 5 --warmup 1
run speech train.py bench train --device cpu --model speech --types full --repeats 5 --warmup 1
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
