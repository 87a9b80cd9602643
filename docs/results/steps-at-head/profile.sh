#!/usr/bin/env bash
# The op-by-op profile of the speech recogniser's step (its app's default preset, full attention,
# float32, 2 threads), the companion of run.sh. Usage, from the repository root, on a quiet machine:
#   docs/results/steps-at-head/profile.sh TAPESTRY OUT_DIR
set -euo pipefail
tapestry=$1
out=$2
mkdir -p "$out"
command="bench train --device cpu --model speech --types full --repeats 5 --warmup 1"
{
  echo "commit: $("$tapestry" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p')"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "$("$tapestry" version | grep '^cpu ')"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "command: $tapestry $command --profile $out/profile-speech.txt"
} > "$out/profile.log"
# shellcheck disable=SC2086
"$tapestry" $command --profile "$out/profile-speech.txt" >> "$out/profile.log" 2>&1
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/profile.log"
