#!/usr/bin/env bash
# Prints one study run per line (arguments of scripts/study-neural-clustering), most wanted first.
# R: the results root.
R=$1
seeds8="0 1 2 3 4 5 6 7"; seeds5="0 1 2 3 4"
for seed in $seeds8; do
  for arm in none cosine-1e-3 cosine-1e-3-l1 cosine-1e-3-l2 cosine-1e-2 cosine-1e-1 cosine-1e-3-fast cosine-1e-3-slow cosine-1e-3-frozen; do
    echo "--task copy --out $R/copy --arms $arm --seeds $seed"
  done
done
for seed in $seeds5; do
  for arm in none cosine-1e-3 cosine-1e-3-l1 cosine-1e-3-l2; do
    echo "--task classify --out $R/classify --arms $arm --seeds $seed"
    echo "--task translate --out $R/translate --arms $arm --seeds $seed"
  done
done
for seed in $seeds5; do
  for arm in none cosine-1e-3; do
    echo "--task copy --out $R/copy-1200-steps --arms $arm --seeds $seed --extra --steps@1200@--eval-every@400"
    echo "--task copy --out $R/copy-lr-2e-3 --arms $arm --seeds $seed --extra --optimizer@adam:lr=2e-3"
    echo "--task copy --out $R/copy-lr-8e-3 --arms $arm --seeds $seed --extra --optimizer@adam:lr=8e-3"
  done
done
