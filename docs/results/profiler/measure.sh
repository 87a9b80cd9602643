#!/bin/bash
# Profiler overhead on the copy-task model (tapestry bench train), off and on, alternating.
set -e
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
B=${TAPESTRY:-build-h/tapestry}
OUT=docs/results/profiler
export OPENBLAS_CORETYPE=Haswell
{
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo -dirty)"
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "nproc: $(nproc)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "load before: $(uptime)"
} > $OUT/overhead.log
ARGS="bench train --copy-lengths 31 --types full --batch 32 --repeats 10 --warmup 2"
echo "command (off): $B $ARGS --json off-N.json" >> $OUT/overhead.log
echo "command (on):  $B $ARGS --json on-N.json --profile-json profile-N.json --profile table-N.txt" >> $OUT/overhead.log
RUNS=${RUNS:-5}
for i in $(seq $RUNS); do
  $B $ARGS --json $OUT/off-$i.json > /dev/null 2>&1
  $B $ARGS --json $OUT/on-$i.json --profile-json $OUT/profile-$i.json --profile $OUT/table-$i.txt > /dev/null 2>&1
  echo "run $i: off $(python3 -c "import json;print(json.load(open('$OUT/off-$i.json'))['rows'][0]['ms'])") ms, on $(python3 -c "import json;print(json.load(open('$OUT/on-$i.json'))['rows'][0]['ms'])") ms (median of 10 steps); load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/overhead.log
done
RUNS=$RUNS python3 - >> $OUT/overhead.log <<'PY'
import json, os, statistics
n = int(os.environ["RUNS"])
ms = lambda kind, i: json.load(open(f"docs/results/profiler/{kind}-{i}.json"))["rows"][0]["ms"]
off = [ms("off", i) for i in range(1, n + 1)]
on = [ms("on", i) for i in range(1, n + 1)]
ratios = [b / a for a, b in zip(off, on)]
print(f"best of {n} medians: off {min(off):.2f} ms, on {min(on):.2f} ms, on/off {min(on)/min(off):.4f}")
print(f"on/off run by run: {', '.join(f'{r:.3f}' for r in ratios)}; their median {statistics.median(ratios):.4f}")
PY
echo "load after: $(uptime)" >> $OUT/overhead.log
cat $OUT/overhead.log
