// CUDA kernels of the creation functions that compute their values: arange and the random draws
// (full / zeros / ones are fill_, ops/cuda/copy.cu). Element i is computed from i alone, with the
// same expression as the CPU (core/creation.cpp), so the devices agree:
// - arange: start + step · i in double, rounded after each operation (__dmul_rn / __dadd_rn keep
//   the compiler from fusing them into one fma, which would round differently from the CPU);
// - rand / randint: Philox blocks (ops/cuda/philox.cuh) turned into numbers by the functions of
//   core/random.h, exact integer and power-of-two arithmetic: bitwise equal to the CPU;
// - randn: the same blocks and Box–Muller formula, but log / cos / sqrt come from CUDA's math
//   library instead of the host's libm, which may differ in the last bit (CUDA documents ≤ 1–2 ulp
//   for logf / cosf): equal to the CPU within a few ulp, not bitwise.
#include "core/dispatch.h"
#include "ops/cuda/creation.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/philox.cuh"

namespace tapestry::cuda {

namespace {

template <class T, class F>
__global__ void generate_kernel(T* out, int64_t n, F f) {
  TP_GRID_STRIDE_LOOP(i, n) out[i] = f(i);
}

// out[i] = f(i) for a contiguous out.
template <class T, class F>
void generate(const Tensor& out, F f) {
  const int64_t n = out.numel();
  if (n == 0) return;
  CudaContext& ctx = active_context(out.device());
  generate_kernel<T><<<blocks_for(n), kThreads, 0, ctx.stream()>>>(static_cast<T*>(out.raw_data()), n, f);
  TP_CUDA_CHECK_LAUNCH();
}

template <class T>
struct Arange {
  double start, step;
  __device__ T operator()(int64_t i) const {
    return static_cast<T>(__dadd_rn(start, __dmul_rn(step, static_cast<double>(i))));
  }
};

template <class T>
struct Uniform {
  uint64_t first, seed;
  __device__ T operator()(int64_t i) const {
    const PhiloxBlock b = device_philox_block(first + static_cast<uint64_t>(i), seed);
    if constexpr (std::is_same_v<T, float>) return uniform_float(b);
    else return static_cast<T>(uniform_double(b));
  }
};

template <class T>
struct Normal {
  uint64_t first, seed;
  __device__ T operator()(int64_t i) const {
    const PhiloxBlock b = device_philox_block(first + static_cast<uint64_t>(i), seed);
    if constexpr (std::is_same_v<T, float>) return normal_float(b);
    else return static_cast<T>(normal_double(b));
  }
};

template <class T>
struct Integer {
  int64_t low;
  uint64_t range, first, seed;
  __device__ T operator()(int64_t i) const {
    const PhiloxBlock b = device_philox_block(first + static_cast<uint64_t>(i), seed);
    return static_cast<T>(low + static_cast<int64_t>(uniform_below(b, range)));
  }
};

}  // namespace

void arange(const Tensor& out, double start, double step) {
  visit_all(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    generate<T>(out, Arange<T>{start, step});
  });
}

void rand(const Tensor& out, uint64_t first, uint64_t seed) {
  visit_floating(out.dtype(), "rand", [&](auto tag) {
    using T = decltype(tag);
    generate<T>(out, Uniform<T>{first, seed});
  });
}

void randn(const Tensor& out, uint64_t first, uint64_t seed) {
  visit_floating(out.dtype(), "randn", [&](auto tag) {
    using T = decltype(tag);
    generate<T>(out, Normal<T>{first, seed});
  });
}

void randint(const Tensor& out, int64_t low, uint64_t range, uint64_t first, uint64_t seed) {
  visit_numeric(out.dtype(), "randint", [&](auto tag) {
    using T = decltype(tag);
    generate<T>(out, Integer<T>{low, range, first, seed});
  });
}

}  // namespace tapestry::cuda
