#!/usr/bin/env bash
# The second call's study runs: Table 5's ablation on classification and the decoder.
R=$1
for seed in 0 1 2 3 4; do
  for arm in none cosine-1e-3 cosine-1e-3-l1 cosine-1e-3-l2; do
    echo "--task classify --out $R/classify --arms $arm --seeds $seed"
    echo "--task translate --out $R/translate --arms $arm --seeds $seed"
  done
done
