#!/usr/bin/env bash
# The copy task's step at L = 63 (head dim 32: its attention's 32-wide products took 8-row blocks),
# the two programs of run.sh alternating four times. Usage, from the repository root, on a quiet
# machine:
#   docs/results/tile-rows/copy.sh BEFORE AFTER OUT_DIR
set -euo pipefail
before=$1
after=$2
out=$3
mkdir -p "$out"
command="bench train --device cpu --model copy --copy-lengths 63 --types full --repeats 5 --warmup 1"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "command: TAPESTRY $command"
  for round in 1 2 3 4; do
    for side in before after; do
      bin=${!side}
      # shellcheck disable=SC2086
      echo "round $round $side ($("$bin" version | head -1)): $("$bin" $command 2>&1 | grep '^full')"
    done
  done
  echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/copy-L63-alternating.log"
