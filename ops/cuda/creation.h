// CUDA launchers of the creation functions (ops/cuda/creation.cu). Plain C++: ops/creation.cpp
// calls them for tensors made on a GPU. Each fills a contiguous tensor `out` in place, computing
// element i exactly as the CPU does, so that both devices give the same values.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace tapestry::cuda {

// out[i] = start + step · i (in double, then converted to out's dtype)
void arange(const Tensor& out, double start, double step);
// Element i from the Philox block of counter first + i under the key seed (core/random.h):
// uniform in [0, 1), standard normal, or low + uniform_below(range) (floating for rand / randn;
// any dtype but bool for randint).
void rand(const Tensor& out, uint64_t first, uint64_t seed);
void randn(const Tensor& out, uint64_t first, uint64_t seed);
void randint(const Tensor& out, int64_t low, uint64_t range, uint64_t first, uint64_t seed);

}  // namespace tapestry::cuda
