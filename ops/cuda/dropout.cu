// CUDA kernel of dropout: element i is kept from 16-bit draw i % 8 of the Philox block of counter
// first + i / 8 alone (ops/cuda/philox.cuh), as on the CPU (ops/dropout.cpp), so the mask is the
// CPU's bit for bit, whatever the launch configuration, and the backward regenerates it from
// (first, seed) instead of storing it. A thread computes one block and its eight elements.
#include "core/dispatch.h"
#include "ops/cuda/dropout.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/philox.cuh"

namespace tapestry::cuda {

namespace {

template <class T>
__global__ void dropout_kernel(const T* in, T* out, int64_t n, uint64_t first, uint64_t seed, uint32_t cut,
                               compute_t<T> scale) {
  const int64_t blocks = (n + 7) / 8;
  TP_GRID_STRIDE_LOOP(q, blocks) {
    const PhiloxBlock block = device_philox_block(first + static_cast<uint64_t>(q), seed);
    for (int64_t j = 0, i = 8 * q; j < 8 && i < n; ++j, ++i) {
      out[i] = uniform_bits16(block, j) >= cut ? T(compute_t<T>(in[i]) * scale) : T(0);
    }
  }
}

}  // namespace

void dropout_mask(const Tensor& in, const Tensor& out, uint64_t first, uint64_t seed, uint32_t cut, double scale) {
  visit_floating_or_bfloat16(in.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = in.numel();
    if (n == 0) return;
    CudaContext& ctx = active_context(in.device());
    dropout_kernel<T><<<blocks_for((n + 7) / 8), kThreads, 0, ctx.stream()>>>(
        static_cast<const T*>(in.raw_data()), static_cast<T*>(out.raw_data()), n, first, seed, cut,
        static_cast<compute_t<T>>(scale));
    TP_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tapestry::cuda
