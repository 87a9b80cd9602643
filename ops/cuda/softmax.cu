// CUDA kernels of softmax and log-softmax: one block per row (grid-stride over rows, so any number
// of rows fits one launch), the block's threads striding along the row (so rows longer than a block
// need no special case), and each row reduced with the fixed tree of block_reduce: deterministic,
// no atomics. The arithmetic is the CPU's (ops/softmax.cpp): the maximum folded from −inf with
// `>` (NaN never wins), e^(z − m) in x's dtype summed in double, then 1 / Σ (softmax) or log Σ
// (log_softmax) rounded to x's dtype. Only the order of the double sums differs from the CPU.
//
// Masks are read in place through broadcast strides: the leading dims of x address the mask's rows
// through a StridedIndexer (ops/cuda/strided.h), the last dim by its stride, so a (B, 1, 1, S) key
// mask against (B, H, N, S) scores costs nothing extra.
#include <cmath>

#include "core/dispatch.h"
#include "ops/cuda/block_reduce.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/reducers.h"
#include "ops/cuda/softmax.h"
#include "ops/cuda/strided.h"

namespace tapestry::cuda {

namespace {

// z_c, the entry a row normalises: x_c without a mask ...
template <class T>
struct NoMask {
  struct Row {
    __device__ T operator()(T x, int64_t) const { return x; }
  };
  __device__ Row row(int64_t) const { return {}; }
};

// ... keep_c ? x_c : −inf with a bool mask ...
template <class T>
struct KeepMask {
  const bool* keep;         // the mask's first element; row r starts at rows.offsets(r)
  StridedIndexer<1> rows;   // the leading dims of x → offset of the mask's row
  int64_t step;             // the mask's stride along C (0 when it broadcasts there)
  struct Row {
    const bool* keep;
    int64_t step;
    __device__ T operator()(T x, int64_t c) const { return keep[c * step] ? x : static_cast<T>(-INFINITY); }
  };
  __device__ Row row(int64_t r) const {
    int64_t offset[1];
    rows.offsets(r, offset);
    return {keep + offset[0], step};
  }
};

// ... or x_c + bias_c with an additive mask (−inf entries mask out).
template <class T>
struct AddMask {
  const T* bias;
  StridedIndexer<1> rows;
  int64_t step;
  struct Row {
    const T* bias;
    int64_t step;
    __device__ T operator()(T x, int64_t c) const { return x + bias[c * step]; }
  };
  __device__ Row row(int64_t r) const {
    int64_t offset[1];
    rows.offsets(r, offset);
    return {bias + offset[0], step};
  }
};

// y (R, C) from x (R, C): one block per row. Shared memory: blockDim.x doubles.
template <class T, class Mask>
__global__ void softmax_kernel(SoftmaxKind kind, const T* x, Mask mask, T* y, int64_t R, int64_t C) {
  extern __shared__ __align__(16) unsigned char shared[];
  const T inf = static_cast<T>(INFINITY);
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const T* xr = x + r * C;
    T* yr = y + r * C;
    const auto z = mask.row(r);
    T m = -inf;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) m = MaxReducer<T>{}.combine(m, z(xr[c], c));
    m = block_reduce(reinterpret_cast<T*>(shared), m, MaxReducer<T>{});  // NaN when the row holds one
    if (is_nan(m)) {  // a NaN makes the whole row NaN, as on the CPU (same in every thread)
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x) yr[c] = m;
      continue;
    }
    if (m == -inf) {  // every entry masked (m is the same in every thread: all take this branch)
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x) yr[c] = kind == SoftmaxKind::Softmax ? T(0) : -inf;
      continue;
    }
    double s = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += static_cast<double>(std::exp(z(xr[c], c) - m));
    s = block_reduce(reinterpret_cast<double*>(shared), s, SumReducer<double>{});
    if (kind == SoftmaxKind::Softmax) {
      const T inv = static_cast<T>(1.0 / s);
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x) yr[c] = std::exp(z(xr[c], c) - m) * inv;
    } else {
      const T log_s = static_cast<T>(std::log(s));
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x) yr[c] = (z(xr[c], c) - m) - log_s;
    }
  }
}

// dx (R, C) from dy and y: one block per row, the row's dot product (or sum) in double.
template <class T>
__global__ void softmax_backward_kernel(SoftmaxKind kind, const T* dy, const T* y, T* dx, int64_t R, int64_t C) {
  extern __shared__ __align__(16) unsigned char shared[];
  const T inf = static_cast<T>(INFINITY);
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const T* gr = dy + r * C;
    const T* yr = y + r * C;
    T* dr = dx + r * C;
    double acc = 0;
    if (kind == SoftmaxKind::Softmax) {
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x) acc += static_cast<double>(gr[c]) * yr[c];
    } else {
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        if (yr[c] != -inf) acc += gr[c];
    }
    acc = block_reduce(reinterpret_cast<double*>(shared), acc, SumReducer<double>{});
    const T total = static_cast<T>(acc);
    if (kind == SoftmaxKind::Softmax) {
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x) dr[c] = yr[c] * (gr[c] - total);
    } else {
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        dr[c] = yr[c] == -inf ? T(0) : gr[c] - std::exp(yr[c]) * total;
    }
  }
}

// Rows of C at one block each: a power of two of threads, at least a warp, at most kThreads.
struct RowLaunch {
  unsigned blocks;
  int threads;
  size_t shared;
};
RowLaunch row_launch(int64_t R, int64_t C) {
  const int threads = pow2_threads(C, 32, kThreads);
  return {static_cast<unsigned>(std::min<int64_t>(R, kMaxBlocks)), threads, threads * sizeof(double)};
}

template <class T, class Mask>
void launch_forward(CudaContext& ctx, SoftmaxKind kind, const Tensor& x, const Mask& mask, const Tensor& y,
                    int64_t R, int64_t C) {
  const RowLaunch l = row_launch(R, C);
  softmax_kernel<T><<<l.blocks, l.threads, l.shared, ctx.stream()>>>(
      kind, static_cast<const T*>(x.raw_data()), mask, static_cast<T*>(y.raw_data()), R, C);
  TP_CUDA_CHECK_LAUNCH();
}

}  // namespace

void softmax_forward(const char* op, SoftmaxKind kind, const Tensor& x, const Tensor& mask, const Tensor& y) {
  const Shape& shape = x.shape();
  const int64_t C = shape.back(), R = numel(Shape(shape.begin(), shape.end() - 1));
  if (R == 0 || C == 0) return;
  CudaContext& ctx = active_context(x.device());
  visit_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    if (!mask.defined()) {
      launch_forward<T>(ctx, kind, x, NoMask<T>{}, y, R, C);
      return;
    }
    // The mask's rows: its broadcast strides over x's leading dims; along C, its last stride.
    const Strides ms = broadcast_strides(mask, shape);
    const StridedIndexer<1> rows =
        make_indexer<1>(op, Shape(shape.begin(), shape.end() - 1), {Strides(ms.begin(), ms.end() - 1)});
    if (mask.dtype() == DType::Bool)
      launch_forward<T>(ctx, kind, x, KeepMask<T>{mask.data<bool>(), rows, ms.back()}, y, R, C);
    else
      launch_forward<T>(ctx, kind, x, AddMask<T>{mask.data<T>(), rows, ms.back()}, y, R, C);
  });
}

void softmax_backward(const char* op, SoftmaxKind kind, const Tensor& dy, const Tensor& y, const Tensor& dx) {
  const Shape& shape = y.shape();
  const int64_t C = shape.back(), R = numel(Shape(shape.begin(), shape.end() - 1));
  if (R == 0 || C == 0) return;
  CudaContext& ctx = active_context(y.device());
  visit_floating(y.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const RowLaunch l = row_launch(R, C);
    softmax_backward_kernel<T><<<l.blocks, l.threads, l.shared, ctx.stream()>>>(
        kind, static_cast<const T*>(dy.raw_data()), static_cast<const T*>(y.raw_data()),
        static_cast<T*>(dx.raw_data()), R, C);
    TP_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tapestry::cuda
