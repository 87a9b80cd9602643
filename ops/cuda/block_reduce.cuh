// A block's per-thread accumulators combined in a fixed tree: the deterministic reduction every
// row-per-block kernel ends with (reductions, softmax, layer norm, losses). No atomics, no warp
// shuffles whose pairing could change: the order depends only on blockDim.x, never on timing.
#pragma once

#include <cuda_runtime.h>

namespace tapestry::cuda {

// The block's accumulators combined pairwise, the lower thread on the left, halving the stride each
// round (blockDim.x is a power of two); every thread gets the result. `buf` is shared memory for
// blockDim.x accumulators; r.combine(a, b) combines two (the reducers of ops/cuda/reducers.h).
template <class Acc, class R>
__device__ Acc block_reduce(Acc* buf, Acc acc, const R& r) {
  buf[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) buf[threadIdx.x] = r.combine(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  const Acc result = buf[0];
  __syncthreads();  // everyone has read buf[0] before buf is written again
  return result;
}

}  // namespace tapestry::cuda
