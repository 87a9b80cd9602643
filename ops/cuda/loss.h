// CUDA launchers of the fused losses (ops/cuda/loss.cu). Plain C++: ops/loss.cpp calls them for
// tensors on a GPU, after checking the targets on the device (ops/cuda/index_scan.h). Shapes:
// cross-entropy logits, dx (R, C), targets and lse (R); binary cross-entropy logits, targets, dx, dt
// (N); losses and their incoming gradient dy 0-d. All contiguous, on one GPU, in the logits' dtype
// (targets of cross-entropy: int32 / int64). dy is read on the device: no launcher waits for the host.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace tapestry::cuda {

// Per row that is not ignore_index: lse = m + log Σ_c e^(x_c − m), m = max_c x_c, and the row's loss
// (1 − ε)(lse − x_t) + ε (lse − mean_c x_c) in double; loss = Σ_rows loss / valid (0 when valid = 0),
// the rows summed in a fixed order. Ignored rows get lse = 0. Every other target lies in [0, C).
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double eps,
                           int64_t valid, const Tensor& loss, const Tensor& lse);

// dx = dy / valid · (e^(x − lse) − (1 − ε) onehot(t) − ε / C) on valid rows, 0 on ignored rows.
void cross_entropy_backward(const Tensor& dy, const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            int64_t ignore_index, double eps, int64_t valid, const Tensor& dx);

// loss = Σ_i [max(x_i, 0) − x_i t_i + log(1 + e^−|x_i|)] / N in double, summed in a fixed order
// (0 when N = 0).
void binary_cross_entropy_forward(const Tensor& logits, const Tensor& targets, const Tensor& loss);
// dx = dy / N · (σ(x) − t)
void binary_cross_entropy_backward_logits(const Tensor& dy, const Tensor& logits, const Tensor& targets,
                                          const Tensor& dx);
// dt = −dy / N · x
void binary_cross_entropy_backward_targets(const Tensor& dy, const Tensor& logits, const Tensor& dt);

}  // namespace tapestry::cuda
