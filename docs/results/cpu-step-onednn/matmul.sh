#!/usr/bin/env bash
# The float32 products of the models above (rows × in × out of their linears, forward; the weight
# gradients' K × rows × out appear as M×K×N = out×rows×in) through TAPESTRY's matmul, whose library
# is oneDNN's GEMM in a build with oneDNN, beside cblas_sgemm (OpenBLAS) on the same operands in the
# same run (`bench ops`' reference column). Usage, from the repository root, on a quiet machine:
#   docs/results/cpu-step-onednn/matmul.sh TAPESTRY OUT_DIR
set -euo pipefail
tapestry=$1
out=$2
mkdir -p "$out"
shapes=2048x2048x2048,4096x192x192,4096x192x768,4096x768x192,192x4096x192,768x4096x192
shapes=$shapes,1950x64x64,1950x64x256,1950x256x64,64x1950x64,2048x384x384,2048x384x1536,384x2048x384
{
  echo "commit: $("$tapestry" version | sed -n 's/^tapestry .*(commit \(.*\))$/\1/p')"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "$("$tapestry" version | grep '^cpu ')"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "command: $tapestry bench ops --device cpu --elements 1024 --matmul $shapes --repeats 9 --json $out/matmul.json"
} > "$out/matmul.log"
"$tapestry" bench ops --device cpu --elements 1024 --matmul "$shapes" --repeats 9 --json "$out/matmul.json" \
  >> "$out/matmul.log" 2>&1
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/matmul.log"
