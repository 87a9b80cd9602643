#!/usr/bin/env bash
# One device call: the fused-attention kernels with 64-row tiles (checks first), then the benchmarks
# with the new and the previous build side by side, then the copy task's paper preset with
# clustered attention at L = 31, 63, 127 (issue: every app at its real size), until 500 s.
set -u
start=$SECONDS
g=/tmp/g; mkdir -p $g
export PYTHONUNBUFFERED=1 GPU_PYTHON=python3
log=$OUT/console.log
{ nvidia-smi -L; nproc; } > $log 2>&1
b=/tmp/b; mkdir -p $b; tar -C $b -xJf .gpu/gpu.tar.xz
xz -dc .gpu/old/bin/tapestry.xz > $b/bin/tapestry-previous; chmod +x $b/bin/tapestry-previous
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ $b/bin/tapestry version; $b/bin/tapestry-previous version; } >> $log 2>&1
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
fused='*attention_fused*'
# 1: parity (every case), and the fused attention's cases under memcheck and racecheck, at once.
(OMP_NUM_THREADS=5 GPU_CHECK_SECONDS=230 scripts/gpu-validate .gpu/gpu.tar.xz $g/check parity > $g/check.out 2>&1) &
(OMP_NUM_THREADS=5 timeout -k 5 230 $san --tool memcheck --error-exitcode 1 $b/bin/tapestry_cuda_tests --source-file="$fused" --duration=true > $g/memcheck-fused.log 2>&1; echo "exit $?" >> $g/memcheck-fused.log) &
(OMP_NUM_THREADS=5 timeout -k 5 230 $san --tool racecheck --error-exitcode 1 $b/bin/tapestry_cuda_tests --source-file="$fused" --test-case-exclude='*at N = 1000' --duration=true > $g/racecheck-fused.log 2>&1; echo "exit $?" >> $g/racecheck-fused.log) &
wait
echo "checks done at $((SECONDS - start)) s" >> $log
# 2: benchmarks alone on the GPU; the previous build's fused `full` rows in the same minutes.
GPU_BENCH_SECONDS=60 GPU_PEER_SECONDS=50 scripts/gpu-validate .gpu/gpu.tar.xz $g/bench attention attention-torch train train-torch translate-bench translate-bench-torch > $g/bench.out 2>&1
timeout -k 5 60 $b/bin/tapestry-previous bench attention --device cuda --lengths 512,1024,2048,4096,8192,16384,32768 --types full \
  --repeats 3 --warmup 1 --json $g/attention-previous.json > $g/attention-previous.log 2>&1
timeout -k 5 60 $b/bin/tapestry bench train --device cuda --copy-lengths 31 --repeats 5 --warmup 2 --profile $g/train-profile.txt > $g/train-profile.log 2>&1
echo "benchmarks done at $((SECONDS - start)) s" >> $log
# 3: the copy task's paper preset with clustered attention (15 clusters), three lengths at once.
left=$((500 - (SECONDS - start)))
for L in 31 63 127; do
  (timeout -k 5 $left $b/bin/tapestry copy-task --preset paper --length $L --attention clustered:clusters=15 --device cuda \
     --json > $g/copy-clustered-L$L.json 2> $g/copy-clustered-L$L.log; echo "exit $?" >> $g/copy-clustered-L$L.log) &
done
wait
echo "copy task done at $((SECONDS - start)) s" >> $log
for d in check bench; do cat $g/$d/results/summary.txt >> $log 2>/dev/null; done
tail -n 4 $g/memcheck-fused.log $g/racecheck-fused.log >> $log
tail -n 2 $g/copy-clustered-L*.log >> $log
tar czf $OUT/gpu.tgz -C /tmp g
cat $log
