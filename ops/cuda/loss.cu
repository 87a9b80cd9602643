// CUDA kernels of the fused losses, with the CPU's arithmetic (ops/loss.cpp).
//
// Cross-entropy: one block per row (grid-stride over rows, threads striding along the C classes), the
// row's maximum, Σ e^(x − m) and Σ x combined by block_reduce's fixed tree; the per-row losses (in
// double) are then summed by the deterministic row reduction of ops/cuda/reduce.h. Binary
// cross-entropy: one thread per element writes its term (in double), summed the same way. A last
// one-thread kernel divides by the count and rounds to the logits' dtype. No atomics anywhere, so
// the loss has the same bits on every run; it differs from the CPU's only by the order of the double
// sums.
//
// The backward kernels read the incoming gradient dy (0-d) on the device, so that nothing waits
// for the host (the CPU reads it with item()).
#include <cmath>

#include "core/creation.h"
#include "core/dispatch.h"
#include "ops/cuda/block_reduce.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/loss.h"
#include "ops/cuda/reduce.h"
#include "ops/cuda/reducers.h"

namespace tapestry::cuda {

namespace {

// lse (R) and the rows' losses (R, double) of valid rows; 0 for ignored ones, in S (float for
// bfloat16 logits, which are read as float). Shared memory: blockDim.x doubles.
template <class T, class I, class S = compute_t<T>>
__global__ void cross_entropy_rows_kernel(const T* x, const I* targets, int64_t R, int64_t C, int64_t ignore_index,
                                          double eps, S* lse, double* row_loss) {
  extern __shared__ __align__(16) unsigned char shared[];
  const SumReducer<double> add;
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const int64_t target = static_cast<int64_t>(targets[r]);
    if (target == ignore_index) {  // the same in every thread of the block
      if (threadIdx.x == 0) lse[r] = S(0), row_loss[r] = 0.0;
      continue;
    }
    const T* xr = x + r * C;
    S m = S(xr[0]);  // the CPU folds from the first class with >: every thread starts there too
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) m = S(xr[c]) > m ? S(xr[c]) : m;
    m = block_reduce(reinterpret_cast<S*>(shared), m, MaxReducer<S>{});
    double s = 0, total = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      s += static_cast<double>(std::exp(S(xr[c]) - m));
      total += S(xr[c]);
    }
    s = block_reduce(reinterpret_cast<double*>(shared), s, add);
    total = block_reduce(reinterpret_cast<double*>(shared), total, add);
    if (threadIdx.x == 0) {
      const double l = static_cast<double>(m) + std::log(s);
      lse[r] = static_cast<S>(l);
      row_loss[r] = (1 - eps) * (l - S(xr[target])) + eps * (l - total / static_cast<double>(C));
    }
  }
}

template <class T, class I, class S = compute_t<T>>
__global__ void cross_entropy_backward_kernel(const S* dy, const T* x, const I* targets, const S* lse, int64_t R,
                                              int64_t C, int64_t ignore_index, double eps, int64_t valid, T* dx) {
  const S scale = valid > 0 ? static_cast<S>(static_cast<double>(*dy) / static_cast<double>(valid)) : S(0);
  const S on = static_cast<S>(1 - eps), off = static_cast<S>(eps / static_cast<double>(C));
  TP_GRID_STRIDE_LOOP(i, R * C) {
    const int64_t r = i / C, c = i % C;
    const int64_t target = static_cast<int64_t>(targets[r]);
    dx[i] = target == ignore_index ? T(S(0))
                                   : T(scale * (std::exp(S(x[i]) - lse[r]) - off - (c == target ? on : S(0))));
  }
}

// terms[i] = max(x, 0) − x t + log(1 + e^−|x|), in double.
template <class T>
__global__ void bce_terms_kernel(const T* x, const T* t, int64_t N, double* terms) {
  TP_GRID_STRIDE_LOOP(i, N) {
    const double v = x[i];
    terms[i] = (v > 0 ? v : 0.0) - v * t[i] + std::log1p(std::exp(-std::abs(v)));
  }
}

template <class T>
__global__ void bce_backward_logits_kernel(const T* dy, const T* x, const T* t, int64_t N, T* dx) {
  const T scale = static_cast<T>(static_cast<double>(*dy) / static_cast<double>(N));
  TP_GRID_STRIDE_LOOP(i, N) {
    const T e = std::exp(-std::abs(x[i]));  // σ(x) without overflow on either side
    const T sigma = x[i] >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e);
    dx[i] = scale * (sigma - t[i]);
  }
}

template <class T>
__global__ void bce_backward_targets_kernel(const T* dy, const T* x, int64_t N, T* dt) {
  const T scale = static_cast<T>(-static_cast<double>(*dy) / static_cast<double>(N));
  TP_GRID_STRIDE_LOOP(i, N) dt[i] = scale * x[i];
}

// out = count > 0 ? sum / count : 0, rounded to T.
template <class T>
__global__ void mean_kernel(const double* sum, int64_t count, T* out) {
  if (blockIdx.x == 0 && threadIdx.x == 0)
    *out = count > 0 ? static_cast<T>(*sum / static_cast<double>(count)) : T(0);
}

// loss = Σ terms / count: the terms (double, any length) summed by the deterministic row reduction.
template <class T>
void mean_into(CudaContext& ctx, const char* op, const Tensor& terms, int64_t count, const Tensor& loss) {
  const Tensor sum = empty({1}, {DType::Float64, loss.device()});
  reduce_rows(op, Reduction::Sum, terms, 1, terms.numel(), sum);
  mean_kernel<T><<<1, 1, 0, ctx.stream()>>>(sum.data<double>(), count, static_cast<T*>(loss.raw_data()));
  TP_CUDA_CHECK_LAUNCH();
}

}  // namespace

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double eps,
                           int64_t valid, const Tensor& loss, const Tensor& lse) {
  const char* op = "cross_entropy";
  visit_floating_or_bfloat16(logits.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    using S = compute_t<T>;
    visit_index(targets.dtype(), op, [&](auto index_tag) {
      using I = decltype(index_tag);
      const int64_t C = logits.shape().back(), R = targets.numel();
      CudaContext& ctx = active_context(logits.device());
      const Tensor row_loss = empty({R}, {DType::Float64, logits.device()});
      if (R > 0) {
        const int threads = pow2_threads(C, 32, kThreads);
        cross_entropy_rows_kernel<T, I><<<static_cast<unsigned>(std::min(R, kMaxBlocks)), threads,
                                          threads * sizeof(double), ctx.stream()>>>(
            static_cast<const T*>(logits.raw_data()), static_cast<const I*>(targets.raw_data()), R, C,
            ignore_index, eps, static_cast<S*>(lse.raw_data()), row_loss.data<double>());
        TP_CUDA_CHECK_LAUNCH();
      }
      mean_into<S>(ctx, op, row_loss, valid, loss);
    });
  });
}

void cross_entropy_backward(const Tensor& dy, const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            int64_t ignore_index, double eps, int64_t valid, const Tensor& dx) {
  const char* op = "cross_entropy";
  visit_floating_or_bfloat16(logits.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    using S = compute_t<T>;
    visit_index(targets.dtype(), op, [&](auto index_tag) {
      using I = decltype(index_tag);
      const int64_t C = logits.shape().back(), R = targets.numel();
      if (R * C == 0) return;
      CudaContext& ctx = active_context(logits.device());
      cross_entropy_backward_kernel<T, I><<<blocks_for(R * C), kThreads, 0, ctx.stream()>>>(
          static_cast<const S*>(dy.raw_data()), static_cast<const T*>(logits.raw_data()),
          static_cast<const I*>(targets.raw_data()), static_cast<const S*>(lse.raw_data()), R, C, ignore_index,
          eps, valid, static_cast<T*>(dx.raw_data()));
      TP_CUDA_CHECK_LAUNCH();
    });
  });
}

void binary_cross_entropy_forward(const Tensor& logits, const Tensor& targets, const Tensor& loss) {
  const char* op = "binary_cross_entropy_with_logits";
  visit_floating(logits.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const int64_t N = logits.numel();
    CudaContext& ctx = active_context(logits.device());
    const Tensor terms = empty({N}, {DType::Float64, logits.device()});
    if (N > 0) {
      bce_terms_kernel<T><<<blocks_for(N), kThreads, 0, ctx.stream()>>>(
          static_cast<const T*>(logits.raw_data()), static_cast<const T*>(targets.raw_data()), N,
          terms.data<double>());
      TP_CUDA_CHECK_LAUNCH();
    }
    mean_into<T>(ctx, op, terms, N, loss);
  });
}

void binary_cross_entropy_backward_logits(const Tensor& dy, const Tensor& logits, const Tensor& targets,
                                          const Tensor& dx) {
  visit_floating(logits.dtype(), "binary_cross_entropy_with_logits", [&](auto tag) {
    using T = decltype(tag);
    const int64_t N = logits.numel();
    if (N == 0) return;
    CudaContext& ctx = active_context(logits.device());
    bce_backward_logits_kernel<T><<<blocks_for(N), kThreads, 0, ctx.stream()>>>(
        static_cast<const T*>(dy.raw_data()), static_cast<const T*>(logits.raw_data()),
        static_cast<const T*>(targets.raw_data()), N, static_cast<T*>(dx.raw_data()));
    TP_CUDA_CHECK_LAUNCH();
  });
}

void binary_cross_entropy_backward_targets(const Tensor& dy, const Tensor& logits, const Tensor& dt) {
  visit_floating(logits.dtype(), "binary_cross_entropy_with_logits", [&](auto tag) {
    using T = decltype(tag);
    const int64_t N = logits.numel();
    if (N == 0) return;
    CudaContext& ctx = active_context(logits.device());
    bce_backward_targets_kernel<T><<<blocks_for(N), kThreads, 0, ctx.stream()>>>(
        static_cast<const T*>(dy.raw_data()), static_cast<const T*>(logits.raw_data()), N,
        static_cast<T*>(dt.raw_data()));
    TP_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tapestry::cuda
