// CUDA kernels of the segment ops: segment_sum, segment_max (and its backward), segment_broadcast,
// and the offsets / layouts of ids: segment_offsets (with its sortedness check) and cluster_layout.
//
// One thread per output element, grid-stride: a segment reduction's thread folds its segment's rows
// in order, as the CPU's task does, with the CPU's accumulator, so the results are the CPU's bit for
// bit and deterministic. Neighbouring threads take neighbouring columns of one row, so reads of x are
// coalesced. A long segment with few columns is folded serially by few threads; clustering's shapes
// (many segments of E columns) keep the GPU busy.
//
// cluster_layout is the CPU's counting sort done as a stable radix sort of (id, row) pairs: rows of
// one cluster keep their order; offsets are found by binary search in the sorted ids.
#include "ops/cuda/segment.h"

#include <type_traits>

#include "core/dispatch.h"
#include "ops/cuda/find.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/radix_sort.cuh"
#include "ops/cuda/reducers.h"

namespace tapestry::cuda {

namespace {

template <class T>
__device__ bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;
  else return false;
}

// y[s, i] = Σ_{n in segment s} x[n, i]
template <class T>
__global__ void segment_sum_kernel(const T* x, const int64_t* offsets, int64_t segments, int64_t width, T* y) {
  TP_GRID_STRIDE_LOOP(e, segments * width) {
    const int64_t s = e / width, i = e % width;
    SumAcc<T> acc = 0;
    for (int64_t n = offsets[s]; n < offsets[s + 1]; ++n) acc += x[n * width + i];
    y[e] = static_cast<T>(acc);
  }
}

// The CPU's fold: start from the first row, replace on a larger value or a first NaN, keep a NaN.
template <class T>
__global__ void segment_max_kernel(const T* x, const int64_t* offsets, int64_t segments, int64_t width, T* y,
                                   int64_t* rows) {
  TP_GRID_STRIDE_LOOP(e, segments * width) {
    const int64_t s = e / width, i = e % width, begin = offsets[s], end = offsets[s + 1];
    T best = T(0);
    int64_t where = -1;
    if (begin < end) {
      best = x[begin * width + i];
      where = begin;
      for (int64_t n = begin + 1; n < end; ++n) {
        const T v = x[n * width + i];
        if (!is_nan(best) && (v > best || is_nan(v))) {
          best = v;
          where = n;
        }
      }
    }
    y[e] = best;
    rows[e] = where;
  }
}

// Distinct (s, i) name distinct elements of dx: plain stores.
template <class T>
__global__ void segment_max_backward_kernel(const T* dy, const int64_t* rows, int64_t count, int64_t width, T* dx) {
  TP_GRID_STRIDE_LOOP(e, count) {
    if (rows[e] >= 0) dx[rows[e] * width + e % width] = dy[e];
  }
}

// The segment of row n < offsets[S]: the last s with offsets[s] ≤ n (an empty segment shares its
// offset with the next one, so the last is the one that holds row n).
__device__ int64_t segment_of(const int64_t* offsets, int64_t segments, int64_t n) {
  int64_t lo = 0, hi = segments + 1;  // the first s with offsets[s] > n lies in (0, S]
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (offsets[mid] <= n) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}

template <class T>
__global__ void segment_broadcast_kernel(const T* values, const int64_t* offsets, int64_t segments, int64_t rows,
                                         int64_t width, T* y) {
  TP_GRID_STRIDE_LOOP(e, rows * width) {
    y[e] = values[segment_of(offsets, segments, e / width) * width + e % width];
  }
}

struct Descent {
  const int64_t* ids;
  __device__ bool operator()(int64_t n) const { return n > 0 && ids[n] < ids[n - 1]; }
};

__global__ void id_keys_kernel(const int64_t* ids, int64_t n, uint64_t* keys) {
  TP_GRID_STRIDE_LOOP(i, n) keys[i] = static_cast<uint64_t>(ids[i]);
}

__global__ void counts_kernel(const int64_t* offsets, int64_t count, int64_t* counts) {
  TP_GRID_STRIDE_LOOP(c, count) counts[c] = offsets[c + 1] - offsets[c];
}

const int64_t* offsets_of(const Tensor& offsets) { return static_cast<const int64_t*>(offsets.raw_data()); }

int64_t width_of(const Tensor& t) { return t.dim() == 0 || t.shape()[0] == 0 ? 0 : t.numel() / t.shape()[0]; }

}  // namespace

void segment_sum(const Tensor& y, const Tensor& x, const Tensor& offsets) {
  visit_numeric(x.dtype(), "segment_sum", [&](auto tag) {
    using T = decltype(tag);
    const int64_t count = y.numel();
    if (count == 0) return;
    CudaContext& ctx = active_context(y.device());
    segment_sum_kernel<<<blocks_for(count), kThreads, 0, ctx.stream()>>>(
        static_cast<const T*>(x.raw_data()), offsets_of(offsets), y.shape()[0], width_of(y), static_cast<T*>(y.raw_data()));
    TP_CUDA_CHECK_LAUNCH();
  });
}

void segment_max(const Tensor& y, const Tensor& rows, const Tensor& x, const Tensor& offsets) {
  visit_numeric(x.dtype(), "segment_max", [&](auto tag) {
    using T = decltype(tag);
    const int64_t count = y.numel();
    if (count == 0) return;
    CudaContext& ctx = active_context(y.device());
    segment_max_kernel<<<blocks_for(count), kThreads, 0, ctx.stream()>>>(
        static_cast<const T*>(x.raw_data()), offsets_of(offsets), y.shape()[0], width_of(y),
        static_cast<T*>(y.raw_data()), static_cast<int64_t*>(rows.raw_data()));
    TP_CUDA_CHECK_LAUNCH();
  });
}

void segment_max_backward(const Tensor& dx, const Tensor& dy, const Tensor& rows) {
  visit_floating(dy.dtype(), "segment_max", [&](auto tag) {
    using T = decltype(tag);
    const int64_t count = dy.numel();
    if (count == 0) return;
    CudaContext& ctx = active_context(dx.device());
    segment_max_backward_kernel<<<blocks_for(count), kThreads, 0, ctx.stream()>>>(
        static_cast<const T*>(dy.raw_data()), static_cast<const int64_t*>(rows.raw_data()), count, width_of(dy),
        static_cast<T*>(dx.raw_data()));
    TP_CUDA_CHECK_LAUNCH();
  });
}

void segment_broadcast(const Tensor& y, const Tensor& values, const Tensor& offsets) {
  visit_all(values.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t count = y.numel();
    if (count == 0) return;
    CudaContext& ctx = active_context(y.device());
    segment_broadcast_kernel<<<blocks_for(count), kThreads, 0, ctx.stream()>>>(
        static_cast<const T*>(values.raw_data()), offsets_of(offsets), values.shape()[0], y.shape()[0], width_of(y),
        static_cast<T*>(y.raw_data()));
    TP_CUDA_CHECK_LAUNCH();
  });
}

int64_t first_descent(const Tensor& ids) {
  CudaContext& ctx = active_context(ids.device());
  return first_where(ctx, ids.numel(), Descent{static_cast<const int64_t*>(ids.raw_data())});
}

void segment_offsets(const Tensor& offsets, const Tensor& ids, int64_t num_segments) {
  CudaContext& ctx = active_context(offsets.device());
  run_offsets(ctx, static_cast<const int64_t*>(ids.raw_data()), ids.numel(), num_segments,
              static_cast<int64_t*>(offsets.raw_data()));
}

void cluster_layout(const Tensor& ids, int64_t num_clusters, const Tensor& permutation, const Tensor& offsets,
                    const Tensor& counts) {
  CudaContext& ctx = active_context(ids.device());
  const int64_t n = ids.numel();
  ScratchBuffer keys(ctx.allocator(), static_cast<size_t>(n) * sizeof(uint64_t));
  ScratchBuffer sorted(ctx.allocator(), static_cast<size_t>(n) * sizeof(uint64_t));
  if (n > 0) {
    id_keys_kernel<<<blocks_for(n), kThreads, 0, ctx.stream()>>>(static_cast<const int64_t*>(ids.raw_data()), n,
                                                                  static_cast<uint64_t*>(keys.data()));
    TP_CUDA_CHECK_LAUNCH();
    stable_sort_order(ctx, static_cast<const uint64_t*>(keys.data()), static_cast<uint64_t*>(sorted.data()),
                      static_cast<int64_t*>(permutation.raw_data()), n,
                      bits_for(static_cast<uint64_t>(num_clusters - 1)));  // n > 0: num_clusters ≥ 1
  }
  run_offsets(ctx, static_cast<const uint64_t*>(sorted.data()), n, num_clusters,
              static_cast<int64_t*>(offsets.raw_data()));
  if (num_clusters > 0) {
    counts_kernel<<<blocks_for(num_clusters), kThreads, 0, ctx.stream()>>>(
        static_cast<const int64_t*>(offsets.raw_data()), num_clusters, static_cast<int64_t*>(counts.raw_data()));
    TP_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace tapestry::cuda
