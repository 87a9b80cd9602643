/// @file
/// Losses. cross_entropy and binary_cross_entropy_with_logits are fused: each is one forward pass and
/// one backward pass over its inputs. nll_loss, mse_loss and kl_div are compositions of ops (their
/// gradients are those ops'), each a 0-d tensor of its input's dtype.
#pragma once

#include "core/tensor.h"

namespace tapestry {

/// Cross-entropy of logits (..., C) against class indices targets (...) (int64 or int32; the shape
/// of logits without its last dim), averaged over the targets that are not ignore_index:
///   loss = (1 / |valid|) Σ_{i valid} [ (1 − ε) (−log p_i[t_i]) + ε · (1/C) Σ_c (−log p_i[c]) ]
/// with p_i = softmax(logits_i) (computed stably through log-softmax) and ε = label_smoothing ∈ [0, 1)
/// (PyTorch's definition: the target distribution is (1 − ε) one-hot + ε / C uniform).
/// Classes run along the LAST dim (PyTorch puts them at dim 1). A target outside [0, C) that is not
/// ignore_index is refused with an error before anything is computed. When every target is ignored
/// (or there are none) the loss is 0 and its gradient is zero, not NaN as in PyTorch, so a batch of
/// padding cannot poison training. Returns a 0-d tensor of the logits' dtype.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                     double label_smoothing = 0.0);

/// mean over all elements of max(x, 0) − x·t + log(1 + e^−|x|), the logistic loss of logits x
/// against targets t (probabilities, usually in [0, 1]; t is differentiable too), stable for any
/// finite x. logits and targets have one floating dtype and the same shape; an empty input gives 0.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets);

/// The negative log-likelihood of log-probabilities log_probs (..., C) (classes along the LAST dim, as
/// in cross_entropy) at class indices targets (...), averaged over the targets that are not
/// ignore_index: −(1 / |valid|) Σ_{i valid} log_probs[i, t_i]. nll_loss(log_softmax(x), t) equals
/// cross_entropy(x, t). Targets, errors and the all-ignored case (0, zero gradient) as cross_entropy.
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index = -100);

/// The mean squared error (1 / N) Σ (input − target)² over all N elements (0 when empty); input and
/// target have one floating dtype and the same shape, and both are differentiable.
Tensor mse_loss(const Tensor& input, const Tensor& target);

/// The Kullback–Leibler divergence KL(p ‖ q) = Σ_c p (log p − log q) of distributions along the last
/// dim, averaged over the other dims (the rows): log_q holds log-probabilities (a log_softmax), p
/// probabilities, one shape and dtype. 0 · log 0 counts as 0. Per row this is PyTorch's
/// kl_div(log_q, p, reduction='batchmean') for a 2-d input; PyTorch's default 'mean' also divides
/// by C (docs/PORTING.md). Differentiable in both.
Tensor kl_div(const Tensor& log_q, const Tensor& p);

}  // namespace tapestry
