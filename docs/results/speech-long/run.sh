#!/usr/bin/env bash
# Speech where clustering might pay: the speech recogniser (asr's default preset) on the speech-long
# set (`make data`: the speech set's utterances joined into ones of 20 s or more, about 540 encoder
# positions; docs/DATA.md), trained with full attention and with clustered and improved-clustered
# attention at 25 and 50 clusters, seeds 0, 1, 2, each run's best checkpoint on the valid split then
# scored on the test split (PER, greedy decoding, and the forward time of an evaluation batch); and
# each full-attention checkpoint scored on the test split with each clustered attention instead
# (train full, evaluate clustered: the clustered-attention paper's Table 1 form).
# Usage, from the repository root, on a quiet machine:
#   docs/results/speech-long/run.sh TAPESTRY OUT_DIR CHECKPOINT_DIR
set -euo pipefail
tapestry=$1
out=$2
ckpt=$3
mkdir -p "$out" "$ckpt"
data=${TAPESTRY_DATA:-$HOME/.cache/tapestry/data}/speech-long
kinds=(full clustered:clusters=25 clustered:clusters=50 improved-clustered:clusters=25 improved-clustered:clusters=50)
name() { echo "$1" | sed 's/:clusters=/-/'; }
{
  echo "program: $tapestry ($("$tapestry" version | head -1))"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), no GPU"
  echo "data: $data ($(cat "$data/.stamp"))"
  echo "train: TAPESTRY asr train --data DATA --attention KIND --seed SEED --save-best CKPT --log LOG --json"
  echo "test: TAPESTRY asr eval --resume CKPT --data DATA --eval-split test [--eval-attention KIND] --json"
} > "$out/run.log"
for seed in 0 1 2; do
  for kind in "${kinds[@]}"; do
    run=$(name "$kind")-$seed
    echo "== train $run, $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
    "$tapestry" asr train --data "$data" --attention "$kind" --seed "$seed" --save-best "$ckpt/$run.ckpt" \
      --log "$out/$run.jsonl" --json > "$out/$run.json" 2>> "$out/run.log"
    "$tapestry" asr eval --resume "$ckpt/$run.ckpt" --data "$data" --eval-split test --json \
      > "$out/$run-test.json" 2>> "$out/run.log"
  done
  for kind in "${kinds[@]:1}"; do
    echo "== test full-$seed with $kind" >> "$out/run.log"
    "$tapestry" asr eval --resume "$ckpt/full-$seed.ckpt" --data "$data" --eval-split test --eval-attention "$kind" \
      --json > "$out/full-$seed-as-$(name "$kind")-test.json" 2>> "$out/run.log"
  done
done
echo "== done $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/run.log"
