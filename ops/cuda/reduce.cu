// CUDA kernels of the reductions: sum, max, min, argmax, argmin, logsumexp over the rows of a
// contiguous (rows, length) matrix (ops/reduce.cpp moves the reduced dims last), and the sum of
// squares behind clip_grad_norm's global norm; and cumsum's scan, one thread per row. mean, var, std
// and norm are compositions and need nothing here.
//
// Deterministic by construction: a block reduces one row, each thread folding a fixed strided share
// and the block combining the threads in a fixed tree (ops/cuda/reducers.h); no atomics. A long row
// with few rows beside it (a full reduction, sum(x)) is cut into chunks, one block each, whose
// partial accumulators go to a scratch buffer and are reduced by a second launch, one block per row,
// again in a fixed order.
#include "ops/cuda/reduce.h"

#include <cmath>

#include "core/dispatch.h"
#include "ops/cuda/block_reduce.cuh"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/reducers.h"

namespace tapestry::cuda {

namespace {

constexpr int64_t kChunk = 4096;  // elements per block when a row is cut into chunks

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Item i of a row: element i of x (first launch) ...
template <class R, class T>
struct RowItems {
  const T* x;  // (rows, length)
  int64_t length;
  R r;
  __device__ typename R::Acc operator()(int64_t row, int64_t i) const { return r.load(x[row * length + i], i); }
};

// ... or the partial accumulator of chunk i (second launch).
template <class Acc>
struct PartialItems {
  const Acc* partials;  // (rows, chunks)
  int64_t chunks;
  __device__ Acc operator()(int64_t row, int64_t i) const { return partials[row * chunks + i]; }
};

template <class R>
struct FinishInto {
  typename R::Out* out;  // (rows,)
  R r;
  __device__ void operator()(int64_t row, typename R::Acc acc) const { out[row] = r.finish(acc); }
};

template <class Acc>
struct PartialInto {
  Acc* partials;  // (rows, chunks)
  __device__ void operator()(int64_t piece, Acc acc) const { partials[piece] = acc; }
};

// Piece p = row · chunks + c reduces items [c · chunk, min(count, (c + 1) · chunk)) of its row into
// sink(p, acc). One block per piece, grid-stride over pieces.
template <class R, class Items, class Sink>
__global__ void reduce_kernel(R r, Items items, int64_t rows, int64_t count, int64_t chunks,
                              int64_t chunk, Sink sink) {
  using Acc = typename R::Acc;
  extern __shared__ __align__(16) unsigned char shared[];
  Acc* buf = reinterpret_cast<Acc*>(shared);
  if (count == 0) return;
  for (int64_t piece = blockIdx.x; piece < rows * chunks; piece += gridDim.x) {
    const int64_t row = piece / chunks, begin = piece % chunks * chunk;
    const int64_t end = begin + chunk < count ? begin + chunk : count;
    Acc acc = r.start(items(row, 0));
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) acc = r.combine(acc, items(row, i));
    acc = block_reduce(buf, acc, r);
    if (threadIdx.x == 0) sink(piece, acc);
  }
}

unsigned blocks_for_pieces(int64_t pieces) {
  return static_cast<unsigned>(std::min<int64_t>(pieces, kMaxBlocks));
}

template <class R, class T>
void reduce_with(CudaContext& ctx, const T* x, typename R::Out* out, int64_t rows, int64_t length) {
  using Acc = typename R::Acc;
  const R r{};
  const RowItems<R, T> items{x, length, r};
  // Enough blocks to fill the GPU: cut rows into chunks when there are too few rows.
  const int64_t target = 4 * static_cast<int64_t>(ctx.multiprocessors());
  int64_t chunks = 1;
  if (rows < target && length > 2 * kChunk) chunks = std::min(ceil_div(length, kChunk), ceil_div(target, rows));
  const int64_t chunk = ceil_div(length, chunks);
  chunks = ceil_div(length, chunk);
  const int threads = pow2_threads(chunk, 32, kThreads);
  if (chunks == 1) {
    reduce_kernel<<<blocks_for_pieces(rows), threads, threads * sizeof(Acc), ctx.stream()>>>(
        r, items, rows, length, 1, length, FinishInto<R>{out, r});
    TP_CUDA_CHECK_LAUNCH();
    return;
  }
  ScratchBuffer partials(ctx.allocator(), static_cast<size_t>(rows * chunks) * sizeof(Acc));
  Acc* p = static_cast<Acc*>(partials.data());
  reduce_kernel<<<blocks_for_pieces(rows * chunks), threads, threads * sizeof(Acc), ctx.stream()>>>(
      r, items, rows, length, chunks, chunk, PartialInto<Acc>{p});
  TP_CUDA_CHECK_LAUNCH();
  const int threads2 = pow2_threads(chunks, 32, kThreads);
  reduce_kernel<<<blocks_for_pieces(rows), threads2, threads2 * sizeof(Acc), ctx.stream()>>>(
      r, PartialItems<Acc>{p, chunks}, rows, chunks, 1, chunks, FinishInto<R>{out, r});
  TP_CUDA_CHECK_LAUNCH();
}

// One block per row, grid-stride over rows, as the CPU computes it:
// log Σ e^x = m + log Σ e^(x − m), m = max x (NaN ignored: the CPU folds from −inf with >);
// m = ±inf (all −inf, an empty row, or any +inf) is the result itself.
template <class T>
__global__ void logsumexp_kernel(const T* x, T* out, int64_t rows, int64_t length) {
  using Acc = SumAcc<T>;
  extern __shared__ __align__(16) unsigned char shared[];
  const T inf = static_cast<T>(INFINITY);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* p = x + row * length;
    T m = -inf;
    for (int64_t i = threadIdx.x; i < length; i += blockDim.x) m = p[i] > m ? p[i] : m;
    m = block_reduce(reinterpret_cast<T*>(shared), m, MaxReducer<T>{});
    if (m == inf || m == -inf) {  // m is the same in every thread: they all take this branch
      if (threadIdx.x == 0) out[row] = m;
      continue;
    }
    Acc s = 0;
    for (int64_t i = threadIdx.x; i < length; i += blockDim.x) s += exp(static_cast<Acc>(p[i] - m));
    s = block_reduce(reinterpret_cast<Acc*>(shared), s, SumReducer<T>{});
    if (threadIdx.x == 0) out[row] = static_cast<T>(m + log(s));
  }
}

template <class T>
__global__ void cumsum_kernel(const T* x, T* y, int64_t rows, int64_t length) {
  TP_GRID_STRIDE_LOOP(row, rows) cumsum_row(x + row * length, y + row * length, length);
}

}  // namespace

void reduce_rows(const char* op, Reduction kind, const Tensor& x, int64_t rows, int64_t length,
                 const Tensor& out) {
  if (kind == Reduction::LogSumExp) {
    visit_floating(x.dtype(), op, [&](auto tag) {
      using T = decltype(tag);
      if (rows == 0) return;
      CudaContext& ctx = active_context(x.device());
      const int threads = pow2_threads(length, 32, kThreads);
      logsumexp_kernel<T><<<blocks_for_pieces(rows), threads, threads * sizeof(SumAcc<T>), ctx.stream()>>>(
          static_cast<const T*>(x.raw_data()), static_cast<T*>(out.raw_data()), rows, length);
      TP_CUDA_CHECK_LAUNCH();
    });
    return;
  }
  if (x.dtype() == DType::BFloat16) {  // sums only, accumulated in double as float32's
    TP_CHECK(kind == Reduction::Sum, op, "has no bfloat16 kernel: convert the tensor with to(x, DType::Float32)");
    if (rows == 0) return;
    if (length == 0) return cuda::fill_(out, 0.0);
    reduce_with<SumReducer<bfloat16>>(active_context(x.device()), static_cast<const bfloat16*>(x.raw_data()),
                                      static_cast<bfloat16*>(out.raw_data()), rows, length);
    return;
  }
  visit_numeric(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    if (rows == 0) return;
    if (length == 0) {
      TP_CHECK(kind == Reduction::Sum, op, "internal error: reducing an empty row");
      cuda::fill_(out, 0.0);
      return;
    }
    CudaContext& ctx = active_context(x.device());
    const T* in = static_cast<const T*>(x.raw_data());
    T* values = kind == Reduction::ArgMax || kind == Reduction::ArgMin ? nullptr : static_cast<T*>(out.raw_data());
    int64_t* indices = values ? nullptr : static_cast<int64_t*>(out.raw_data());
    switch (kind) {
      case Reduction::Sum: reduce_with<SumReducer<T>>(ctx, in, values, rows, length); break;
      case Reduction::Max: reduce_with<MaxReducer<T>>(ctx, in, values, rows, length); break;
      case Reduction::Min: reduce_with<MinReducer<T>>(ctx, in, values, rows, length); break;
      case Reduction::ArgMax: reduce_with<ArgMaxReducer<T>>(ctx, in, indices, rows, length); break;
      case Reduction::ArgMin: reduce_with<ArgMinReducer<T>>(ctx, in, indices, rows, length); break;
      case Reduction::LogSumExp: break;
    }
  });
}

void cumsum_rows(const Tensor& x, int64_t rows, int64_t length, const Tensor& out) {
  visit_numeric(x.dtype(), "cumsum", [&](auto tag) {
    using T = decltype(tag);
    if (rows == 0 || length == 0) return;
    CudaContext& ctx = active_context(x.device());
    cumsum_kernel<T><<<blocks_for(rows), kThreads, 0, ctx.stream()>>>(static_cast<const T*>(x.raw_data()),
                                                                      static_cast<T*>(out.raw_data()), rows, length);
    TP_CUDA_CHECK_LAUNCH();
  });
}

void sum_of_squares(const Tensor& x, const Tensor& out) {
  visit_floating(x.dtype(), "sum_of_squares", [&](auto tag) {
    using T = decltype(tag);
    if (x.numel() == 0) {
      cuda::fill_(out, 0.0);
      return;
    }
    CudaContext& ctx = active_context(x.device());
    reduce_with<SumOfSquaresReducer<T>>(ctx, static_cast<const T*>(x.raw_data()), out.data<double>(), 1, x.numel());
  });
}

}  // namespace tapestry::cuda
