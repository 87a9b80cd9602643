#!/usr/bin/env bash
set -u
start=$SECONDS
b=/tmp/b; mkdir -p $b; tar -C $b -xJf .gpu/gpu.tar.xz
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TAPESTRY_DATA=$b/data GPU_PYTHON=python3 PYTHONUNBUFFERED=1
nvidia-smi -L > $OUT/console.log 2>&1
g=/tmp/g; mkdir -p $g
(GPU_RESUME_APPS=asr timeout -k 5 120 scripts/gpu-validate .gpu/gpu.tar.xz $g/resume resume > $g/resume.out 2>&1) &
for a in clustered:clusters=25 improved-clustered:clusters=25,topk=32; do
  (OMP_NUM_THREADS=2 timeout -k 5 215 $b/bin/tapestry classify --device cuda --data spam-assassin --eval-split test --attention $a --json \
     > $g/classify-${a%%:*}.json 2> $g/classify-${a%%:*}.log) &
done
export TAPESTRY_BIN=$b/bin/tapestry STUDY_COMMIT=${COMMIT:-unknown} OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
R=docs/results/neural-clustering-ablation
.gpu/sweep-jobs2.sh $R | timeout -k 5 $((222 - (SECONDS - start))) xargs -P 12 -L 1 .gpu/study-one.sh
echo "study stopped at $((SECONDS - start)) s: $(cat $R/*/runs.jsonl | wc -l) runs" >> $OUT/console.log
wait
echo "all done at $((SECONDS - start)) s" >> $OUT/console.log
tar czf $OUT/study.tgz $R
cp $g/resume/results/summary.txt $g/resume-summary.txt; tar czf $g/resume.tgz -C $g/resume results; rm -rf $g/resume
tar czf $OUT/gpu.tgz -C /tmp g
cat $g/resume-summary.txt >> $OUT/console.log; tail -n1 $g/classify-*.log >> $OUT/console.log
cat $OUT/console.log
