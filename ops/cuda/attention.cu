// CUDA kernels of fused attention (ops/cuda/attention.h): one thread per query, its keys in turn
// with an online softmax (running maximum and sum), the output accumulated in place. The backward
// recomputes each probability from the saved log-sum-exp; dq is the thread's own row, dk and dv take
// atomic adds. Plain and correct rather than fast: no tiles in shared memory yet.
#include <cmath>

#include "core/dispatch.h"
#include "ops/cuda/attention.h"
#include "ops/cuda/launch.cuh"

namespace tapestry::cuda {

namespace {

struct Sizes {
  int64_t G, H, N, S, E, M;
  bool causal;
};

__device__ int64_t keys_seen(const Sizes& z, const int64_t* lengths, int64_t g, int64_t i) {
  int64_t end = lengths ? lengths[g / z.H] : z.S;
  return z.causal ? min(end, i + 1) : end;
}

template <class T>
__global__ void forward_kernel(Sizes z, T scale, const T* q, const T* k, const T* v, const int64_t* lengths, T* out,
                               T* lse) {
  TP_GRID_STRIDE_LOOP(row, z.G * z.N) {
    const int64_t g = row / z.N, i = row % z.N, seen = keys_seen(z, lengths, g, i);
    const T* qi = q + row * z.E;
    T* o = out + row * z.M;
    for (int64_t c = 0; c < z.M; ++c) o[c] = T(0);
    T m = -INFINITY, sum = 0;
    for (int64_t j = 0; j < seen; ++j) {
      const T* kj = k + (g * z.S + j) * z.E;
      T dot = 0;
      for (int64_t e = 0; e < z.E; ++e) dot += qi[e] * kj[e];
      const T score = scale * dot, next = score > m ? score : m;
      const T factor = exp(m - next), p = exp(score - next);  // m = −inf first: factor 0
      sum = sum * factor + p;
      const T* vj = v + (g * z.S + j) * z.M;
      for (int64_t c = 0; c < z.M; ++c) o[c] = o[c] * factor + p * vj[c];
      m = next;
    }
    const T inv = sum > T(0) ? T(1) / sum : T(0);
    for (int64_t c = 0; c < z.M; ++c) o[c] *= inv;
    lse[row] = sum > T(0) ? m + log(sum) : T(-INFINITY);
  }
}

template <class T>
__global__ void backward_kernel(Sizes z, T scale, const T* q, const T* k, const T* v, const int64_t* lengths,
                                const T* out, const T* lse, const T* dout, T* dq, T* dk, T* dv) {
  TP_GRID_STRIDE_LOOP(row, z.G * z.N) {
    const int64_t g = row / z.N, i = row % z.N;
    const int64_t seen = lse[row] == T(-INFINITY) ? 0 : keys_seen(z, lengths, g, i);
    const T *qi = q + row * z.E, *doi = dout + row * z.M, *oi = out + row * z.M;
    T* dqi = dq + row * z.E;
    T d = 0;  // D_i = Σ_m dout_im · out_im
    for (int64_t c = 0; c < z.M; ++c) d += doi[c] * oi[c];
    for (int64_t e = 0; e < z.E; ++e) dqi[e] = T(0);
    for (int64_t j = 0; j < seen; ++j) {
      const T *kj = k + (g * z.S + j) * z.E, *vj = v + (g * z.S + j) * z.M;
      T dot = 0, dp = 0;
      for (int64_t e = 0; e < z.E; ++e) dot += qi[e] * kj[e];
      for (int64_t c = 0; c < z.M; ++c) dp += doi[c] * vj[c];
      const T p = exp(scale * dot - lse[row]), ds = p * (dp - d);
      for (int64_t e = 0; e < z.E; ++e) {
        dqi[e] += scale * ds * kj[e];
        atomicAdd(dk + (g * z.S + j) * z.E + e, scale * ds * qi[e]);
      }
      for (int64_t c = 0; c < z.M; ++c) atomicAdd(dv + (g * z.S + j) * z.M + c, p * doi[c]);
    }
  }
}

Sizes sizes_of(const FusedAttentionShape& s) { return {s.B * s.H, s.H, s.N, s.S, s.E, s.M, s.causal}; }

}  // namespace

void fused_attention_forward(const FusedAttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& key_lengths, const Tensor& out, const Tensor& lse) {
  const Sizes z = sizes_of(s);
  if (z.G * z.N == 0) return;
  CudaContext& ctx = active_context(q.device());
  visit_floating(q.dtype(), "fused_attention", [&](auto tag) {
    using T = decltype(tag);
    forward_kernel<T><<<blocks_for(z.G * z.N), kThreads, 0, ctx.stream()>>>(
        z, T(s.scale), q.data<T>(), k.data<T>(), v.data<T>(),
        key_lengths.defined() ? key_lengths.data<int64_t>() : nullptr, out.data<T>(), lse.data<T>());
    TP_CUDA_CHECK_LAUNCH();
  });
}

void fused_attention_backward(const FusedAttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& key_lengths, const Tensor& out, const Tensor& lse, const Tensor& dout,
                              const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  const Sizes z = sizes_of(s);
  CudaContext& ctx = active_context(q.device());
  visit_floating(q.dtype(), "fused_attention", [&](auto tag) {
    using T = decltype(tag);
    // dk and dv take atomic adds from every query: start them at zero.
    TP_CUDA_CHECK(cudaMemsetAsync(dk.raw_data(), 0, z.G * z.S * z.E * sizeof(T), ctx.stream()));
    TP_CUDA_CHECK(cudaMemsetAsync(dv.raw_data(), 0, z.G * z.S * z.M * sizeof(T), ctx.stream()));
    if (z.G * z.N == 0) return;
    backward_kernel<T><<<blocks_for(z.G * z.N), kThreads, 0, ctx.stream()>>>(
        z, T(s.scale), q.data<T>(), k.data<T>(), v.data<T>(),
        key_lengths.defined() ? key_lengths.data<int64_t>() : nullptr, out.data<T>(), lse.data<T>(), dout.data<T>(),
        dq.data<T>(), dk.data<T>(), dv.data<T>());
    TP_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tapestry::cuda
