// What every CUDA op family shares: launch configuration, the grid-stride loop, the context.
//
// Kernels loop over their elements with a grid-stride loop, so a grid of at most kMaxBlocks blocks
// covers any size (a 1-d tensor of 70 million elements runs ~4 rounds), and the loop condition is
// the kernel's bounds guard. Launchers take the context of the output's device, queue the kernel on
// its stream and check the launch.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda_check.h"
#include "core/cuda_context.h"

namespace tapestry::cuda {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 16;

// Blocks for n elements at `threads` per block, capped (the grid-stride loop does the rest).
inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + threads - 1) / threads, 1, kMaxBlocks));
}

// The smallest power of two ≥ n, clamped to [lo, hi]: block sizes for per-row work.
inline int pow2_threads(int64_t n, int lo, int hi) {
  int t = lo;
  while (t < hi && t < n) t *= 2;
  return t;
}

}  // namespace tapestry::cuda

// for (int64_t i = first index of this thread; i < n; i += threads in the grid)
#define TP_GRID_STRIDE_LOOP(i, n)                                                          \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
