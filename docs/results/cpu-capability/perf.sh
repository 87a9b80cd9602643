#!/usr/bin/env bash
# Where the classifier's full-attention step spends its time, by function (Linux perf, sampling the
# whole benchmark run: its sgemm-rate measurement, warm-up and timed steps). Usage, from the
# repository root, on a quiet machine with perf installed:
#   docs/results/cpu-capability/perf.sh TAPESTRY OUT_FILE
set -euo pipefail
tapestry=$1
out=$2
data=$(mktemp)
command="bench train --device cpu --model classifier --types full --repeats 2 --warmup 1"
{
  echo "commit: $("$tapestry" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p')"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "$("$tapestry" version | grep '^cpu kernels')"
  echo "command: perf record -o DATA $tapestry $command; perf report -i DATA --no-children --sort symbol"
} > "$out"
# shellcheck disable=SC2086
perf record -q -o "$data" "$tapestry" $command >> "$out" 2>&1
perf report -i "$data" --no-children --percent-limit 1 --stdio --sort symbol 2>/dev/null | grep '%' |
  sed 's/ \{2,\}-.*$//' | cut -c1-160 >> "$out"
rm -f "$data"
