#!/usr/bin/env bash
# The installed MLP example (examples/mlp: 5 epochs over Fashion-MNIST), a program of one's own that
# links the library, on an idle machine and beside one busy core (`yes`): libgomp's default spinning,
# GOMP_SPINCOUNT=5000 set in its environment, and one thread. One run of each, wall time. Usage, on a
# quiet 2-core machine, with the example built against an installed Tapestry (README, "Use it from
# your own project") and `make data` done:
#   docs/results/openmp-spinning/mlp.sh MLP_BINARY TAPESTRY OUT_DIR
set -euo pipefail
mlp=$1
tapestry=$2
out=$3
mkdir -p "$out"
log="$out/mlp.log"
{
  echo "commit: $("$tapestry" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p') (the installed library)"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "columns: machine setting seconds last-line"
} > "$log"
run() {  # machine, setting (an environment assignment or "default")
  local start end env_set=()
  [ "$2" != default ] && env_set=("$2")
  start=$(date +%s.%N)
  local last
  last=$(env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY -u OMP_NUM_THREADS "${env_set[@]}" "$mlp" 2>&1 | tail -1)
  end=$(date +%s.%N)
  printf "%s %s %.1f %s\n" "$1" "$2" "$(echo "$end - $start" | bc)" "$last" >> "$log"
}
for machine in idle busy; do
  busy=""
  if [ "$machine" = busy ]; then yes > /dev/null & busy=$!; sleep 1; fi
  for setting in default GOMP_SPINCOUNT=5000 OMP_NUM_THREADS=1; do run "$machine" "$setting"; done
  if [ -n "$busy" ]; then kill "$busy"; fi
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$log"
