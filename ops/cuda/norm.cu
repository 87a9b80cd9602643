// CUDA kernels of layer norm, with the CPU's arithmetic (ops/norm.cpp): statistics in double by two
// passes (mean, then the sum of squared deviations), x̂ rounded to x's dtype before the affine part.
//
// Layout and determinism:
// - forward and dx: one block per row (grid-stride over rows), threads striding along the row, the
//   row's sums combined by block_reduce's fixed tree;
// - dweight, dbias (sums over rows, per column): two passes, no atomics. Pass 1 cuts the rows into
//   chunks; block (column tile, chunk) has one thread per column summing its chunk's rows in order
//   into a double partial (reads coalesced along the row). Pass 2 has one thread per column adding
//   the chunks' partials in chunk order. The chunking depends only on R, so the result does too:
//   the same bits on every run and every GPU.
#include <cmath>

#include "core/dispatch.h"
#include "ops/cuda/block_reduce.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/norm.h"
#include "ops/cuda/reducers.h"

namespace tapestry::cuda {

namespace {

constexpr int64_t kMaxChunks = 256;       // row chunks of the dweight / dbias pass 1, at most
constexpr int64_t kMinChunkRows = 32;     // rows per chunk, at least

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One block per row. Shared memory: blockDim.x doubles. xhat may be null.
template <class T>
__global__ void layer_norm_forward_kernel(const T* x, const T* w, const T* b, double eps, int64_t R, int64_t D,
                                          T* y, bfloat16* xhat, double* mean, double* rstd) {
  extern __shared__ __align__(16) unsigned char shared[];
  double* buf = reinterpret_cast<double*>(shared);
  const SumReducer<double> add;
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const T* xr = x + r * D;
    T* yr = y + r * D;
    double sum = 0, sq = 0;
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x) sum += xr[c];
    sum = block_reduce(buf, sum, add);
    const double mu = D > 0 ? sum / static_cast<double>(D) : 0.0;
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x) sq += (xr[c] - mu) * (xr[c] - mu);
    sq = block_reduce(buf, sq, add);
    const double var = D > 0 ? sq / static_cast<double>(D) : 0.0;
    const double s = 1.0 / std::sqrt(var + eps);
    if (threadIdx.x == 0) mean[r] = mu, rstd[r] = s;
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x) {
      const T xh = static_cast<T>((xr[c] - mu) * s);
      yr[c] = (w ? xh * w[c] : xh) + (b ? b[c] : T(0));
      if (xhat) xhat[r * D + c] = bfloat16(static_cast<float>(xh));
    }
  }
}

// dx, one block per row: a = mean_c g, b = mean_c (g ⊙ x̂), dx = rstd · (g − a − x̂ ⊙ b). With mean
// null, x is x̂.
template <class T>
__global__ void layer_norm_dx_kernel(const T* dy, const T* x, const double* mean, const double* rstd, const T* w,
                                     int64_t R, int64_t D, T* dx) {
  extern __shared__ __align__(16) unsigned char shared[];
  double* buf = reinterpret_cast<double*>(shared);
  const SumReducer<double> add;
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const T* gr = dy + r * D;
    const T* xr = x + r * D;
    const double s = rstd[r], m = mean ? mean[r] : 0.0, sx = mean ? s : 1.0;  // x̂ = (x − m) · sx
    double sum_g = 0, sum_gx = 0;
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x) {
      const double gc = w ? gr[c] * w[c] : gr[c];
      sum_g += gc;
      sum_gx += gc * ((xr[c] - m) * sx);
    }
    sum_g = block_reduce(buf, sum_g, add);
    sum_gx = block_reduce(buf, sum_gx, add);
    const double a = sum_g / static_cast<double>(D), b = sum_gx / static_cast<double>(D);
    T* dr = dx + r * D;
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x) {
      const double gc = w ? gr[c] * w[c] : gr[c];
      dr[c] = static_cast<T>(s * (gc - a - (xr[c] - m) * sx * b));
    }
  }
}

// Pass 1 of dweight / dbias: partial_w[k, c] = Σ_{r in chunk k} dy[r, c] · x̂[r, c], partial_b[k, c] =
// Σ_{r in chunk k} dy[r, c], rows in order. Grid: (column tiles, grid-stride) × chunks. With mean
// null, x is x̂.
template <class T>
__global__ void layer_norm_partials_kernel(const T* dy, const T* x, const double* mean, const double* rstd,
                                           int64_t R, int64_t D, int64_t chunk_rows, double* partial_w,
                                           double* partial_b) {
  const int64_t k = blockIdx.y;
  const int64_t r0 = k * chunk_rows, r1 = r0 + chunk_rows < R ? r0 + chunk_rows : R;
  TP_GRID_STRIDE_LOOP(c, D) {
    double acc_w = 0, acc_b = 0;
    for (int64_t r = r0; r < r1; ++r) {
      const T g = dy[r * D + c];
      acc_w += g * (mean ? (x[r * D + c] - mean[r]) * rstd[r] : static_cast<double>(x[r * D + c]));
      acc_b += g;
    }
    if (partial_w) partial_w[k * D + c] = acc_w;
    if (partial_b) partial_b[k * D + c] = acc_b;
  }
}

// Pass 2: dweight[c] = Σ_k partial_w[k, c], dbias[c] = Σ_k partial_b[k, c], chunks in order.
template <class T>
__global__ void layer_norm_columns_kernel(const double* partial_w, const double* partial_b, int64_t chunks,
                                          int64_t D, T* dw, T* db) {
  TP_GRID_STRIDE_LOOP(c, D) {
    double acc_w = 0, acc_b = 0;
    for (int64_t k = 0; k < chunks; ++k) {
      if (dw) acc_w += partial_w[k * D + c];
      if (db) acc_b += partial_b[k * D + c];
    }
    if (dw) dw[c] = static_cast<T>(acc_w);
    if (db) db[c] = static_cast<T>(acc_b);
  }
}

template <class T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.raw_data()) : nullptr;
}

template <class T>
T* mutable_or_null(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr;
}

}  // namespace

void layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, int64_t R,
                        int64_t D, const Tensor& y, const Tensor& xhat, const Tensor& mean, const Tensor& rstd) {
  visit_floating(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    if (R == 0) return;
    CudaContext& ctx = active_context(x.device());
    const int threads = pow2_threads(D, 32, kThreads);
    layer_norm_forward_kernel<T><<<static_cast<unsigned>(std::min(R, kMaxBlocks)), threads,
                                   threads * sizeof(double), ctx.stream()>>>(
        static_cast<const T*>(x.raw_data()), data_or_null<T>(weight), data_or_null<T>(bias), eps, R, D,
        static_cast<T*>(y.raw_data()), mutable_or_null<bfloat16>(xhat), mean.data<double>(), rstd.data<double>());
    TP_CUDA_CHECK_LAUNCH();
  });
}

void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, int64_t R, int64_t D, const Tensor& dx, const Tensor& dweight,
                         const Tensor& dbias) {
  visit_floating(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    if (D == 0) return;  // every output is empty
    CudaContext& ctx = active_context(x.device());
    const T* g = static_cast<const T*>(dy.raw_data());
    const T* src = static_cast<const T*>(x.raw_data());
    if (dx.defined() && R > 0) {
      const int threads = pow2_threads(D, 32, kThreads);
      layer_norm_dx_kernel<T><<<static_cast<unsigned>(std::min(R, kMaxBlocks)), threads,
                                threads * sizeof(double), ctx.stream()>>>(
          g, src, data_or_null<double>(mean), rstd.data<double>(), data_or_null<T>(weight), R, D,
          static_cast<T*>(dx.raw_data()));
      TP_CUDA_CHECK_LAUNCH();
    }
    if (!dweight.defined() && !dbias.defined()) return;
    // Chunks of at least kMinChunkRows rows, at most kMaxChunks of them: R alone decides.
    const int64_t chunk_rows = std::max(kMinChunkRows, ceil_div(R, kMaxChunks));
    const int64_t chunks = ceil_div(R, chunk_rows);  // 0 when R = 0: the sums are empty, 0
    // partial_w, partial_b (chunks, D) each, for the gradients wanted, in one scratch buffer
    const int64_t wanted = (dweight.defined() ? 1 : 0) + (dbias.defined() ? 1 : 0);
    ScratchBuffer partials(ctx.allocator(), static_cast<size_t>(wanted * chunks * D) * sizeof(double));
    double* pw = dweight.defined() ? static_cast<double*>(partials.data()) : nullptr;
    double* pb = dbias.defined() ? static_cast<double*>(partials.data()) + (pw ? chunks * D : 0) : nullptr;
    const int threads = pow2_threads(D, 32, kThreads);
    if (chunks > 0) {
      const dim3 grid(blocks_for(D, threads), static_cast<unsigned>(chunks));
      layer_norm_partials_kernel<T><<<grid, threads, 0, ctx.stream()>>>(
          g, src, data_or_null<double>(mean), rstd.data<double>(), R, D, chunk_rows, pw, pb);
      TP_CUDA_CHECK_LAUNCH();
    }
    layer_norm_columns_kernel<T><<<blocks_for(D, threads), threads, 0, ctx.stream()>>>(
        pw, pb, chunks, D, mutable_or_null<T>(dweight), mutable_or_null<T>(dbias));
    TP_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tapestry::cuda
