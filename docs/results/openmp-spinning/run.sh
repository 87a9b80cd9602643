#!/usr/bin/env bash
# The copy task's smoke preset, 60 steps, on an idle machine and beside one busy core (`yes`), with
# OpenMP's default threads (two here) and with one, under several libgomp spin counts: 300000 (libgomp's
# default), 5000, 1000, and none set (`tapestry` then starts again with 5000 by itself). Three runs of each, wall
# time. Usage, from the repository root, on a quiet 2-core machine:
#   docs/results/openmp-spinning/run.sh TAPESTRY OUT_DIR
set -euo pipefail
tapestry=$1
out=$2
mkdir -p "$out"
log="$out/run.log"
{
  echo "commit: $("$tapestry" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p')"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "command: $tapestry copy-task --preset smoke --steps 60 --eval-every 0 --threads THREADS"
  echo "columns: spin machine threads seconds"
} > "$log"
run() {  # spin, machine, threads
  local start end
  start=$(date +%s.%N)
  if [ "$1" = unset ]; then
    env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY "$tapestry" copy-task --preset smoke --steps 60 --eval-every 0 \
      --threads "$3" > /dev/null 2>&1
  else
    env -u OMP_WAIT_POLICY GOMP_SPINCOUNT="$1" "$tapestry" copy-task --preset smoke --steps 60 --eval-every 0 \
      --threads "$3" > /dev/null 2>&1
  fi
  end=$(date +%s.%N)
  printf "%s %s %s %.2f\n" "$1" "$2" "$3" "$(echo "$end - $start" | bc)" >> "$log"
}
for machine in idle busy; do
  busy=""
  if [ "$machine" = busy ]; then yes > /dev/null & busy=$!; sleep 1; fi
  for spin in 300000 5000 1000 unset; do
    for i in 1 2 3; do run "$spin" "$machine" 0; run "$spin" "$machine" 1; done
  done
  if [ -n "$busy" ]; then kill "$busy"; fi
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$log"
