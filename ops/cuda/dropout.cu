// CUDA kernel of dropout: element i is kept from word i % 4 of the Philox block of counter
// first + i / 4 alone (ops/cuda/philox.cuh), as on the CPU (ops/dropout.cpp), so the mask is the
// CPU's bit for bit, whatever the launch configuration, and the backward regenerates it from
// (first, seed) instead of storing it. A thread computes one block and its four elements.
#include "core/dispatch.h"
#include "ops/cuda/dropout.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/philox.cuh"

namespace tapestry::cuda {

namespace {

template <class T>
__global__ void dropout_kernel(const T* in, T* out, int64_t n, uint64_t first, uint64_t seed, double p, T scale) {
  const int64_t blocks = (n + 3) / 4;
  TP_GRID_STRIDE_LOOP(q, blocks) {
    const PhiloxBlock block = device_philox_block(first + static_cast<uint64_t>(q), seed);
    for (int64_t w = 0, i = 4 * q; w < 4 && i < n; ++w, ++i) {
      out[i] = uniform_float(block.w[w]) >= p ? in[i] * scale : T(0);
    }
  }
}

}  // namespace

void dropout_mask(const Tensor& in, const Tensor& out, uint64_t first, uint64_t seed, double p, double scale) {
  visit_floating(in.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = in.numel();
    if (n == 0) return;
    CudaContext& ctx = active_context(in.device());
    dropout_kernel<T><<<blocks_for((n + 3) / 4), kThreads, 0, ctx.stream()>>>(
        static_cast<const T*>(in.raw_data()), static_cast<T*>(out.raw_data()), n, first, seed, p,
        static_cast<T>(scale));
    TP_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tapestry::cuda
