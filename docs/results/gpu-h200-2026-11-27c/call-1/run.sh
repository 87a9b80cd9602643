#!/usr/bin/env bash
# One device call: validate the CUDA code changed since the last validated commit (fused attention,
# TF32 matmuls), then the attention and training-step benchmarks beside their PyTorch peers.
set -u
start=$SECONDS
g=/tmp/g; mkdir -p $g
export PYTHONUNBUFFERED=1 GPU_PYTHON=python3
log=$OUT/console.log
{ nvidia-smi -L; nproc; git log -1 --format=%h 2>/dev/null; } > $log 2>&1
b=/tmp/b; mkdir -p $b; tar -C $b -xJf .gpu/gpu.tar.xz
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# A: the whole parity suite, the CPU suite's GPU cases, memcheck and racecheck (whole), and the fused
# attention's cases alone under both sanitizers (a verdict for them even if the whole runs are cut).
(GPU_CHECK_SECONDS=175 scripts/gpu-validate .gpu/gpu.tar.xz $g/check parity memcheck racecheck suite > $g/check.out 2>&1) &
(timeout -k 5 175 $san --tool memcheck --error-exitcode 1 $b/bin/tapestry_cuda_tests --source-file='*attention_fused*' --duration=true > $g/memcheck-fused.log 2>&1; echo "exit $?" >> $g/memcheck-fused.log) &
(timeout -k 5 175 $san --tool racecheck --error-exitcode 1 $b/bin/tapestry_cuda_tests --source-file='*attention_fused*' --test-case-exclude='*at N = 1000' --duration=true > $g/racecheck-fused.log 2>&1; echo "exit $?" >> $g/racecheck-fused.log) &
wait
echo "checks done at $((SECONDS - start)) s" >> $log
# B: benchmarks alone on the GPU.
GPU_BENCH_SECONDS=120 GPU_PEER_SECONDS=50 scripts/gpu-validate .gpu/gpu.tar.xz $g/bench attention attention-torch train train-torch > $g/bench.out 2>&1
echo "benchmarks done at $((SECONDS - start)) s" >> $log
for d in check bench; do cat $g/$d/results/summary.txt >> $log 2>/dev/null; done
tail -n 4 $g/memcheck-fused.log $g/racecheck-fused.log >> $log
tar czf $OUT/gpu.tgz -C /tmp g
cat $log
