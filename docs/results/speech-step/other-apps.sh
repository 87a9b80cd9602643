#!/usr/bin/env bash
# The same two programs as run.sh on the other apps' steps (steps-at-head/run.sh's rows: the copy
# task at L = 31 and 63, the translation model's small preset, the classifier), full attention,
# float32, 2 threads; three rounds, each the before program then the after program.
# Usage, from the repository root, on a quiet machine:
#   docs/results/speech-step/other-apps.sh BEFORE AFTER OUT_DIR
set -euo pipefail
before=$1
after=$2
out=$3
mkdir -p "$out"
commit() { "$1" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p'; }
{
  echo "before: $before (commit $(commit "$before"))"
  echo "after: $after (commit $(commit "$after"))"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
} > "$out/other-apps.log"
for round in 1 2 3; do
  for side in before after; do
    for app in copy translate classifier; do
      case $app in
        copy) cmd="bench train --device cpu --model copy --copy-lengths 31,63 --types full --repeats 5 --warmup 1" ;;
        translate) cmd="bench translate --device cpu --types full --repeats 3 --warmup 1" ;;
        classifier) cmd="bench train --device cpu --model classifier --types full --repeats 5 --warmup 1" ;;
      esac
      echo "== round $round, $side, $app, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/other-apps.log"
      echo "command: TAPESTRY $cmd --json $out/$app-$side-$round.json" >> "$out/other-apps.log"
      # shellcheck disable=SC2086
      "${!side}" $cmd --json "$out/$app-$side-$round.json" >> "$out/other-apps.log" 2>&1
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/other-apps.log"
