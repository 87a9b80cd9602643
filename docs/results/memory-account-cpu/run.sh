#!/usr/bin/env bash
# The peak memory of one attention layer (forward + backward, N = 4096, batch 1, the layer of
# `tapestry bench attention`) accounted by op: `bench attention --profile` for each attention
# kind, one kind a run (the profiler keeps the account of the highest session). Memory figures do
# not depend on the machine's load. Usage, from the repository root:
#   docs/results/memory-account-cpu/run.sh TAPESTRY OUT_DIR
set -euo pipefail
tapestry=$1
here=$2  # relative to the repository root, so the paths in run.log are too
mkdir -p "$here"
{
  echo "commit: $("$tapestry" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p')"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
} > "$here/run.log"
for type in full full:fused=0 clustered improved-clustered neural-clustering; do
  name=${type/:fused=0/-unfused}
  command=("$tapestry" bench attention --device cpu --lengths 4096 --types "$type" --repeats 1 --warmup 1
           --json "$here/$name.json" --profile "$here/$name.txt" --profile-json "$here/$name-profile.json")
  echo "command: OMP_NUM_THREADS=2 ${command[*]}" >> "$here/run.log"
  OMP_NUM_THREADS=2 "${command[@]}" > /dev/null
done
