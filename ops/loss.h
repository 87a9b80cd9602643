// Losses, fused: each is one forward pass and one backward pass over its inputs.
#pragma once

#include "core/tensor.h"

namespace tapestry {

// Cross-entropy of logits (..., C) against class indices targets (...) (int64 or int32; the shape
// of logits without its last dim), averaged over the targets that are not ignore_index:
//   loss = (1 / |valid|) Σ_{i valid} [ (1 − ε) (−log p_i[t_i]) + ε · (1/C) Σ_c (−log p_i[c]) ]
// with p_i = softmax(logits_i) (computed stably through log-softmax) and ε = label_smoothing ∈ [0, 1)
// (PyTorch's definition: the target distribution is (1 − ε) one-hot + ε / C uniform).
// Classes run along the LAST dim (PyTorch puts them at dim 1). A target outside [0, C) that is not
// ignore_index is refused with an error before anything is computed. When every target is ignored
// (or there are none) the loss is 0 and its gradient is zero, not NaN as in PyTorch, so a batch of
// padding cannot poison training. Returns a 0-d tensor of the logits' dtype.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                     double label_smoothing = 0.0);

// mean over all elements of max(x, 0) − x·t + log(1 + e^−|x|), the logistic loss of logits x
// against targets t (probabilities, usually in [0, 1]; t is differentiable too), stable for any
// finite x. logits and targets have one floating dtype and the same shape; an empty input gives 0.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets);

}  // namespace tapestry
