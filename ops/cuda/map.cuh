// The elementwise map kernel: out[i] = f(in[i]...) over out's shape, the inputs broadcast to it,
// every operand strided. The CUDA twin of cpu_map (ops/loops.h), used by the elementwise, copy and
// creation launchers.
#pragma once

#include <array>
#include <utility>

#include "core/tensor.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/strided.h"

namespace tapestry::cuda {

template <int N>
struct InputPointers {
  const void* ptr[N > 0 ? N : 1];
};

// One element of a map with output type Out and input types In...: out[i] = f(in[i]...).
template <class Out, class... In>
struct MapSignature {
  static constexpr int N = 1 + static_cast<int>(sizeof...(In));

  template <class F>
  __device__ static void apply(const StridedIndexer<N>& ix, int64_t i, Out* out,
                               const InputPointers<N - 1>& in, const F& f) {
    apply(ix, i, out, in, f, std::index_sequence_for<In...>{});
  }
  template <class F, std::size_t... K>
  __device__ static void apply(const StridedIndexer<N>& ix, int64_t i, Out* out,
                               const InputPointers<N - 1>& in, const F& f, std::index_sequence<K...>) {
    int64_t offset[N];
    ix.offsets(i, offset);
    out[offset[0]] = f(static_cast<const In*>(in.ptr[K])[offset[K + 1]]...);
  }
};

template <class Signature, class Out, class F>
static __global__ void map_kernel(int64_t n, StridedIndexer<Signature::N> ix, Out* out,
                                  InputPointers<Signature::N - 1> in, F f) {
  TP_GRID_STRIDE_LOOP(i, n) Signature::apply(ix, i, out, in, f);
}

// out[i] = f(in[i]...) on out's device. Element types are given explicitly, as for cpu_map:
// gpu_map<float, float, float>(op, out, f, a, b). `out` may be strided (in-place ops pass a view)
// but must not overlap itself; an input may be `out` itself (each element reads only its own).
template <class Out, class... In, class F, class... Tensors>
void gpu_map(const char* op, const Tensor& out, F f, const Tensors&... in) {
  static_assert(sizeof...(In) == sizeof...(Tensors), "one element type per input");
  constexpr int N = 1 + static_cast<int>(sizeof...(In));
  const int64_t n = out.numel();
  if (n == 0) return;
  const std::array<Strides, N> strides{out.strides(), broadcast_strides(in, out.shape())...};
  const StridedIndexer<N> ix = make_indexer<N>(op, out.shape(), strides);
  const InputPointers<sizeof...(In)> pointers{{in.raw_data()...}};
  CudaContext& ctx = active_context(out.device());
  map_kernel<MapSignature<Out, In...>><<<blocks_for(n), kThreads, 0, ctx.stream()>>>(
      n, ix, static_cast<Out*>(out.raw_data()), pointers, f);
  TP_CUDA_CHECK_LAUNCH();
}

}  // namespace tapestry::cuda
