#!/usr/bin/env bash
# scripts/gpu-bundle and scripts/gpu-validate on a machine without a GPU (GPU_DEVICE=cpu): the
# bundle unpacks and its programs find their libraries, the parity suite's step runs and reports
# that it was skipped (no GPU), and the
# `classify` learning step's five runs (four attentions and naive Bayes, tiny settings here) and the
# `classify-tables` step's runs (one k, one seed here) each write their JSON result; bad steps and archives are refused. Time on a GPU is scarce: a script
# that breaks when an app's flags change should fail here, not there.
#
# Usage: tests/gpu/dry_run.sh BUILD_DIR   (a CUDA build: it bundles tapestry_cuda_tests too)
set -Eeuo pipefail
trap 'echo "gpu dry run: failed (line $LINENO): $BASH_COMMAND" >&2' ERR

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
data=${TAPESTRY_DATA:-$HOME/.cache/tapestry/data}
if [ ! -d "$data/spam-assassin" ]; then
  [ -n "${CI:-}" ] && { echo "gpu dry run: spam-assassin is not prepared (make data)" >&2; exit 1; }
  echo "gpu dry run: skipped, spam-assassin is not prepared (make data)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/tapestry-gpu-dry-run.XXXXXX")
trap 'rm -rf "$work"' EXIT

XZ_OPT=-0 "$root/scripts/gpu-bundle" "$build" "$work/bundle.tar.xz" spam-assassin
GPU_DEVICE=cpu GPU_CLASSIFY_FLAGS="--preset smoke --max-length 64 --max-per-class 10 --threads 1" \
  GPU_CLASSIFY_TRAIN_FLAGS="--steps 2 --eval-every 0" \
  GPU_TABLE4_CLUSTERS=5 GPU_TABLE5_SEEDS=0 \
  "$root/scripts/gpu-validate" "$work/bundle.tar.xz" "$work/out" parity classify classify-tables
summary=$work/out/summary.txt
# Without a GPU the parity suite checks nothing: the summary must say so rather than "passed".
grep -qx 'parity: skipped, no GPU (exit 0, [0-9]* s)' "$summary"
grep -qx 'classify: passed (exit 0, [0-9]* s)' "$summary"
for run in full clustered improved-clustered neural-clustering bow; do
  grep -q '"accuracy":' "$work/out/results/classify-spam-$run.json"
done
grep -qx 'classify-tables: passed (exit 0, [0-9]* s)' "$summary"
for run in table4-full table4-k5 table5-mu0-nu0-seed0 table5-mu1e-3-nu1e-3-seed0; do
  grep -q '"accuracy":' "$work/out/results/$run.json"
done
tar -tzf "$work/out/results.tgz" results/summary.txt > /dev/null

status=0
"$root/scripts/gpu-validate" "$work/bundle.tar.xz" "$work/bad" no-such-step 2> "$work/err" || status=$?
[ $status -eq 2 ] && grep -q "unknown step 'no-such-step'" "$work/err"
status=0
"$root/scripts/gpu-validate" "$work/missing.tar.xz" "$work/bad" parity 2> "$work/err" || status=$?
[ $status -eq 1 ] && grep -q 'cannot unpack' "$work/err"
status=0
"$root/scripts/gpu-bundle" "$build" "$work/x.tar.xz" no-such-set 2> "$work/err" || status=$?
[ $status -eq 1 ] && grep -q "no prepared data set 'no-such-set'" "$work/err"
echo "gpu dry run: passed"
