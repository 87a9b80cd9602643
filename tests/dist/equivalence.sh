#!/usr/bin/env bash
# Data parallelism is the large batch, split: 2 ranks with a batch of 4 each, over 50 Adam steps,
# end with the weights of 1 process with a batch of 8 over the same examples.
#
# Tolerance: |a - b| <= 1e-5 + 1e-4·|b| per weight. The two runs compute the same sums in another
# order: one process averages the squared errors of 8 rows in one reduction, two ranks average 4
# rows each and then the two means (MPI's sum of two floats, times 1/2), and OpenBLAS may block a
# product of 4 rows differently from one of 8. Each gradient thus differs by a few float32 rounding
# errors (relative ~1e-7); Adam divides by the gradient's running RMS, so a relative change of the
# gradient is one of the update (lr = 1e-2), and 50 steps accumulate at most ~50 · 1e-2 · 1e-6 on
# weights of size ~1. The bound leaves room for that and for the tanh layers' amplification, while
# averaging mistakes are far outside it: a run that saw only rank 0's half of the examples (below)
# must differ by more, or the test could not fail.
source "$(dirname "$0")/common.sh"

"$check" train --batch 8 --steps 50 --save "$dir/one.ckpt" > /dev/null
two_ranks "$check" train --batch 4 --steps 50 --save "$dir/two.ckpt" --distributed > /dev/null
"$check" compare "$dir/two.ckpt" "$dir/one.ckpt" --atol 1e-5 --rtol 1e-4 ||
  fail "2 ranks x batch 4 differ from 1 process x batch 8 by more than the tolerance"

"$check" train --batch 4 --steps 50 --save "$dir/half.ckpt" > /dev/null
if "$check" compare "$dir/two.ckpt" "$dir/half.ckpt" --atol 1e-5 --rtol 1e-4; then
  fail "the weights of a run over half of the examples pass the tolerance: it cannot tell"
fi
echo "equivalence: passed"
