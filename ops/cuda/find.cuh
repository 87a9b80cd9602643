// Finding the first element that fails a check, on the device, for the ops that must refuse bad
// input (out-of-range indices, unsorted ids) with an Error before any of their kernels writes.
//
// first_where returns the smallest i < n where pred(i) holds, or n. Threads take positions in
// grid-stride order and stop at their first hit; a warp keeps its smallest hit and one lane folds it
// into a single counter with an integer atomicMin. Integer minima are exact in any order, so the
// answer is deterministic, and it is the CPU's answer (the first offender in row-major order). The
// host waits for it: the caller throws, or launches its kernels, knowing.
#pragma once

#include <cstdint>

#include "ops/cuda/launch.cuh"

namespace tapestry::cuda {

constexpr unsigned long long kNotFound = ~0ull;

template <class Pred>
__global__ void first_where_kernel(int64_t n, Pred pred, unsigned long long* first) {
  unsigned long long mine = kNotFound;
  TP_GRID_STRIDE_LOOP(i, n) {
    if (pred(i)) {  // a thread's positions grow along its loop: its first hit is its smallest
      mine = static_cast<unsigned long long>(i);
      break;
    }
  }
  // Every lane reaches this point (blockDim is a multiple of 32), so the whole warp takes part.
  for (int offset = 16; offset > 0; offset /= 2) {
    const unsigned long long other = __shfl_down_sync(0xffffffffu, mine, offset);
    mine = other < mine ? other : mine;
  }
  if ((threadIdx.x & 31) == 0 && mine != kNotFound) atomicMin(first, mine);
}

// The first i in [0, n) with pred(i) (a __device__ functor), or n. Waits for the device.
template <class Pred>
int64_t first_where(CudaContext& ctx, int64_t n, const Pred& pred) {
  if (n == 0) return 0;
  ScratchBuffer found(ctx.allocator(), sizeof(unsigned long long));
  TP_CUDA_CHECK(cudaMemsetAsync(found.data(), 0xff, sizeof(unsigned long long), ctx.stream()));  // kNotFound
  first_where_kernel<<<blocks_for(n), kThreads, 0, ctx.stream()>>>(
      n, pred, static_cast<unsigned long long*>(found.data()));
  TP_CUDA_CHECK_LAUNCH();
  unsigned long long first = kNotFound;
  TP_CUDA_CHECK(cudaMemcpyAsync(&first, found.data(), sizeof first, cudaMemcpyDeviceToHost, ctx.stream()));
  TP_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  return first == kNotFound ? n : static_cast<int64_t>(first);
}

// Element i of a device array, copied to the host (for an error message).
template <class T>
T read_element(CudaContext& ctx, const T* data, int64_t i) {
  T value{};
  TP_CUDA_CHECK(cudaMemcpyAsync(&value, data + i, sizeof(T), cudaMemcpyDeviceToHost, ctx.stream()));
  TP_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  return value;
}

}  // namespace tapestry::cuda
