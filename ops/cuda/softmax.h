// CUDA launchers of softmax and log-softmax (ops/cuda/softmax.cu). Plain C++: ops/softmax.cpp calls
// them for tensors on a GPU, with the rows laid out as on the CPU. Shapes: x, y, dy, dx (R, C), R
// rows of C classes (C = the last dim, R the product of the others).
#pragma once

#include "core/tensor.h"

namespace tapestry::cuda {

enum class SoftmaxKind { Softmax, LogSoftmax };

// y = softmax or log_softmax of each row of x, into y; x and y contiguous, of one shape and floating
// dtype. `mask` is undefined, bool (true = keep) or additive of x's dtype, broadcastable to x's shape
// and read through broadcast strides in place (never materialised at x's shape). As on the CPU: the
// row maximum is subtracted, masked entries give 0 (−inf), a row with every entry masked gives
// zeros (softmax) or −inf (log_softmax).
void softmax_forward(const char* op, SoftmaxKind kind, const Tensor& x, const Tensor& mask, const Tensor& y);

// dx from dy and the forward's output y, all contiguous of one shape:
//   softmax:      dx = y ⊙ (dy − Σ_c dy ⊙ y)
//   log_softmax:  dx = dy − e^y ⊙ Σ_c dy, over entries with y > −inf (masked ones get 0)
void softmax_backward(const char* op, SoftmaxKind kind, const Tensor& dy, const Tensor& y, const Tensor& dx);

}  // namespace tapestry::cuda
