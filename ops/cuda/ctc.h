// CUDA launchers of the CTC loss (ops/cuda/ctc.cu). Plain C++: ops/ctc.cpp calls them for tensors on
// a GPU after checking every length and label on the host. Shapes: log_probs and grad (B, T, C),
// targets (B, S), input_lengths, target_lengths, log_p, loss and dy (B), alpha (B, T, 2S + 1). All
// contiguous, on one GPU; floating tensors in the log-probabilities' dtype, the rest int64.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/ctc.h"

namespace tapestry::cuda {

// Per utterance b: α (rows t < T_b, positions s < 2S_b + 1; −inf beyond the utterance's positions),
// log_p[b] = log p(z_b|x_b) and loss[b] = −log_p[b] (0 instead of +inf under CtcInfinity::Zero).
void ctc_forward(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                 const Tensor& target_lengths, int64_t blank, CtcInfinity infinity, const Tensor& alpha,
                 const Tensor& log_p, const Tensor& loss);

// grad[b, t, k] = −dy[b] e^{lcab − log y_t^k − log_p[b]} for t < T_b (ops/ctc_math.h), 0 for t ≥ T_b and
// for every frame of an utterance whose log_p is −inf. β is computed here, in scratch memory.
void ctc_backward(const Tensor& dy, const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                  const Tensor& target_lengths, int64_t blank, const Tensor& alpha, const Tensor& log_p,
                  const Tensor& grad);

}  // namespace tapestry::cuda
