// CUDA kernel of dropout: element i is kept from the Philox block of counter first + i alone
// (ops/cuda/philox.cuh), so the mask is the CPU's bit for bit, whatever the launch configuration,
// and the backward regenerates it from (first, seed) instead of storing it.
#include "core/dispatch.h"
#include "ops/cuda/dropout.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/philox.cuh"

namespace tapestry::cuda {

namespace {

template <class T>
__global__ void dropout_kernel(const T* in, T* out, int64_t n, uint64_t first, uint64_t seed, double p, T scale) {
  TP_GRID_STRIDE_LOOP(i, n) {
    const bool keep = uniform_float(device_philox_block(first + static_cast<uint64_t>(i), seed)) >= p;
    out[i] = keep ? in[i] * scale : T(0);
  }
}

}  // namespace

void dropout_mask(const Tensor& in, const Tensor& out, uint64_t first, uint64_t seed, double p, double scale) {
  visit_floating(in.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = in.numel();
    if (n == 0) return;
    CudaContext& ctx = active_context(in.device());
    dropout_kernel<T><<<blocks_for(n), kThreads, 0, ctx.stream()>>>(
        static_cast<const T*>(in.raw_data()), static_cast<T*>(out.raw_data()), n, first, seed, p,
        static_cast<T>(scale));
    TP_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tapestry::cuda
