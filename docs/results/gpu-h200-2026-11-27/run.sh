b=.gpu/gpu.tar.xz; v=scripts/gpu-validate; export GPU_PYTHON=python3
GPU_CHECK_SECONDS=110 $v $b /tmp/v parity memcheck racecheck > $OUT/checks.log 2>&1
GPU_LEARN_SECONDS=270 timeout -k 5 400 $v $b /tmp/t translate > $OUT/translate.log 2>&1 &
GPU_LEARN_SECONDS=270 timeout -k 5 400 $v $b /tmp/c classify > $OUT/classify.log 2>&1 &
timeout -k 5 400 $v $b /tmp/r resume > $OUT/resume.log 2>&1
wait
for d in v t c r; do tar czf $OUT/$d.tgz -C /tmp/$d results; done
cat /tmp/?/results/summary.txt; nvidia-smi -L
