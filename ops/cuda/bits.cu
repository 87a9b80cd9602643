// CUDA kernels of pack_sign_bits and hamming_distance: one thread per code, and an elementwise map
// (ops/cuda/map.cuh) with the hardware popcount. Integer arithmetic only, so the results are the
// CPU's bit for bit.
#include "ops/cuda/bits.h"

#include "core/dispatch.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/map.cuh"

namespace tapestry::cuda {

namespace {

// codes[m] = Σ_r [x[m, r] > 0] · 2^r; NaN and ±0 compare false and leave their bit clear.
template <class T>
__global__ void pack_sign_bits_kernel(const T* x, int64_t rows, int64_t bits, int64_t* codes) {
  TP_GRID_STRIDE_LOOP(m, rows) {
    uint64_t code = 0;
    for (int64_t r = 0; r < bits; ++r) code |= static_cast<uint64_t>(x[m * bits + r] > T(0)) << r;
    codes[m] = static_cast<int64_t>(code);  // two's complement: bit 63 becomes the sign
  }
}

struct Hamming {
  __device__ int64_t operator()(int64_t a, int64_t b) const {
    return __popcll(static_cast<unsigned long long>(a ^ b));
  }
};

}  // namespace

void pack_sign_bits(const Tensor& codes, const Tensor& x) {
  visit_floating(x.dtype(), "pack_sign_bits", [&](auto tag) {
    using T = decltype(tag);
    const int64_t rows = codes.numel();
    if (rows == 0) return;
    CudaContext& ctx = active_context(codes.device());
    pack_sign_bits_kernel<<<blocks_for(rows), kThreads, 0, ctx.stream()>>>(
        static_cast<const T*>(x.raw_data()), rows, x.shape().back(), static_cast<int64_t*>(codes.raw_data()));
    TP_CUDA_CHECK_LAUNCH();
  });
}

void hamming_distance(const Tensor& y, const Tensor& a, const Tensor& b) {
  gpu_map<int64_t, int64_t, int64_t>("hamming_distance", y, Hamming{}, a, b);
}

}  // namespace tapestry::cuda
