// CUDA launcher of dropout's mask (ops/cuda/dropout.cu). Plain C++: ops/dropout.cpp calls it for
// tensors on a GPU, forward (on x) and backward (on dy, the same mask regenerated).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace tapestry::cuda {

// out[i] = keep_i ? in[i] · scale : 0 for contiguous floating in and out of one shape, where element
// i (row-major) is kept iff uniform_bits16(philox_block(first + i / 8, seed), i % 8) ≥ cut: the
// CPU's mask bit for bit (cuRAND's Philox core with the layout of core/random.h), and the same
// product, so out equals the CPU's exactly.
void dropout_mask(const Tensor& in, const Tensor& out, uint64_t first, uint64_t seed, uint32_t cut, double scale);

}  // namespace tapestry::cuda
