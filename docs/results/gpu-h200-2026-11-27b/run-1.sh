#!/usr/bin/env bash
# One device call: GPU steps and, on the other cores, the neural-clustering ablation study (CPU).
set -u
start=$SECONDS
b=/tmp/b; mkdir -p $b; tar -C $b -xJf .gpu/gpu.tar.xz; xz -dc .gpu/tapestry_tests.xz > $b/bin/tapestry_tests; chmod +x $b/bin/tapestry_tests
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TAPESTRY_DATA=$b/data GPU_PYTHON=python3 PYTHONUNBUFFERED=1
nvidia-smi -L > $OUT/console.log 2>&1; nproc >> $OUT/console.log; grep -m1 'model name' /proc/cpuinfo >> $OUT/console.log
echo "unpacked at $((SECONDS - start)) s" >> $OUT/console.log
g=/tmp/g; mkdir -p $g
# GPU: parity at this commit; resume (every app, asr included); the CPU suite's GPU cases; the copy
# task's paper preset at L = 127 with improved-clustered; classification's default preset.
(GPU_CHECK_SECONDS=200 scripts/gpu-validate .gpu/gpu.tar.xz $g/parity parity > $g/parity.out 2>&1) &
(timeout -k 5 400 scripts/gpu-validate .gpu/gpu.tar.xz $g/resume resume > $g/resume.out 2>&1) &
(OMP_NUM_THREADS=2 timeout -k 5 200 $b/bin/tapestry_tests -tc='*GPU*,*gpu*,*cuda*,*CUDA*,*device*' --duration=true > $g/cpu-suite-gpu-cases.log 2>&1; echo "exit $?" >> $g/cpu-suite-gpu-cases.log) &
(GPU_COPY_LENGTH=127 GPU_BENCH_SECONDS=460 scripts/gpu-validate .gpu/gpu.tar.xz $g/copy127 copy-improved > $g/copy127.out 2>&1) &
for a in full neural-clustering:clusters=20; do
  (OMP_NUM_THREADS=2 timeout -k 5 450 $b/bin/tapestry classify --device cuda --data spam-assassin --eval-split test --attention $a --json \
     > $g/classify-${a%%:*}.json 2> $g/classify-${a%%:*}.log) &
done
# CPU: the study, 9 runs at a time, one thread each, until 470 s have passed.
export TAPESTRY_BIN=$b/bin/tapestry STUDY_COMMIT=${COMMIT:-unknown} OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
R=docs/results/neural-clustering-ablation
.gpu/sweep-jobs.sh $R | timeout -k 5 $((470 - (SECONDS - start))) xargs -P 9 -L 1 .gpu/study-one.sh
echo "study stopped at $((SECONDS - start)) s: $(cat $R/*/runs.jsonl | wc -l) runs" >> $OUT/console.log
wait
echo "all done at $((SECONDS - start)) s" >> $OUT/console.log
tar czf $OUT/study.tgz $R
for d in parity resume copy127; do cp $g/$d/results/summary.txt $g/$d-summary.txt 2>/dev/null; tar czf $g/$d.tgz -C $g/$d results 2>/dev/null; rm -rf $g/$d; done
tar czf $OUT/gpu.tgz -C /tmp g
cat $g/*summary.txt >> $OUT/console.log; tail -3 $g/cpu-suite-gpu-cases.log >> $OUT/console.log
cat $OUT/console.log
