// CUDA launchers of the packed-bit ops (ops/cuda/bits.cu). Plain C++: ops/bits.cpp calls them for
// tensors on a GPU, with outputs allocated on the inputs' device. Integer results: equal to the CPU's
// bit for bit.
#pragma once

#include "core/tensor.h"

namespace tapestry::cuda {

// codes (M,) int64: bit r of codes[m] = [x[m, r] > 0] for x (M, R) contiguous floating, R ≤ 64.
void pack_sign_bits(const Tensor& codes, const Tensor& x);
// y = popcount(a XOR b) for int64 a and b broadcast to y's shape (any strides).
void hamming_distance(const Tensor& y, const Tensor& a, const Tensor& b);

}  // namespace tapestry::cuda
