// CUDA kernels of the index ops: gather, scatter_add, index_select, index_add, one_hot, and the
// device-side range check that refuses bad indices before any of them runs.
//
// Index checks. ops/index.cpp checks every index before it launches anything: first_out_of_range
// finds the first offender on the device (ops/cuda/find.cuh) and the host waits for that one number,
// then throws the CPU's message (position and value included) or launches kernels that may trust the
// indices. The wait costs one round trip per op; in exchange a bad index is an Error at the call,
// with nothing written, never a fault surfacing at some later call.
//
// Accumulation without float atomics (scatter_add, index_add, and so the backward of gather and
// index_select). The positions of src are sorted by the output element they add into, with CUB's
// stable radix sort (ops/cuda/radix_sort.cuh), so that each output's contributions form one run, in
// position order. Then one thread per output element finds its run by binary search and adds it, in
// order, to the value already there. No two threads touch one element, the order never depends on
// timing, and it is the CPU's order (ops/index.cpp adds over j ascending into each element): float
// sums are bit for bit the CPU's. A run is added by one thread, so an output that receives very many
// duplicates is summed serially; the sort itself is what scales.
#include "ops/cuda/index.h"

#include "core/dispatch.h"
#include "ops/cuda/find.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/radix_sort.cuh"
#include "ops/cuda/strided.h"

namespace tapestry::cuda {

namespace {

// A shape seen as (outer, size, inner) around dim d.
struct Fibers {
  int64_t outer = 1, size = 1, inner = 1;
};

Fibers fibers_of(const Shape& shape, int64_t d) {
  Fibers f;
  for (int64_t k = 0; k < static_cast<int64_t>(shape.size()); ++k) {
    if (k < d) f.outer *= shape[k];
    else if (k == d) f.size = shape[k];
    else f.inner *= shape[k];
  }
  return f;
}

// Walks `shape` (index's) and addresses a tensor of `strides` at the same coordinates, except along
// dim d, which the kernel adds itself (index value · strides[d]).
StridedIndexer<1> addresser(const char* op, const Shape& shape, Strides strides, int64_t d) {
  strides[d] = 0;
  return make_indexer<1>(op, shape, {strides});
}

template <class I>
struct Outside {
  const I* index;
  int64_t lo, hi;
  __device__ bool operator()(int64_t i) const {
    const int64_t v = static_cast<int64_t>(index[i]);
    return v < lo || v >= hi;
  }
};

template <class T, class I>
__global__ void gather_kernel(int64_t n, StridedIndexer<1> x_at, const T* x, int64_t step, const I* index, T* y) {
  TP_GRID_STRIDE_LOOP(p, n) {
    int64_t offset[1];
    x_at.offsets(p, offset);
    y[p] = x[offset[0] + static_cast<int64_t>(index[p]) * step];
  }
}

// keys[p] = the element of y (contiguous) that src[p] adds into.
template <class I>
__global__ void scatter_keys_kernel(int64_t n, StridedIndexer<1> y_at, const I* index, int64_t step, uint64_t* keys) {
  TP_GRID_STRIDE_LOOP(p, n) {
    int64_t offset[1];
    y_at.offsets(p, offset);
    keys[p] = static_cast<uint64_t>(offset[0] + static_cast<int64_t>(index[p]) * step);
  }
}

template <class I>
__global__ void index_keys_kernel(int64_t n, const I* index, uint64_t* keys) {
  TP_GRID_STRIDE_LOOP(j, n) keys[j] = static_cast<uint64_t>(index[j]);
}

// How an output element meets its run. scatter_add: element e is key e, and sorted entry p is src[p].
struct ScatterRuns {
  __device__ uint64_t key(int64_t e) const { return static_cast<uint64_t>(e); }
  __device__ int64_t source(int64_t, int64_t p) const { return p; }
};
// index_add: element e = (o, r, i) of y (outer, size, inner) is key r, and entry j of the sorted
// indices is src[o, j, i] of src (outer, m, inner).
struct SliceRuns {
  int64_t size, inner, m;
  __device__ uint64_t key(int64_t e) const { return static_cast<uint64_t>(e / inner % size); }
  __device__ int64_t source(int64_t e, int64_t j) const { return (e / (inner * size) * m + j) * inner + e % inner; }
};

// y[e] += src[source(e, order[t])] for the run of t with sorted[t] = key(e), in order. One thread per
// element of y, so every sum is one thread's, in the CPU's order.
template <class T, class Runs>
__global__ void add_runs_kernel(T* y, int64_t count, const T* src, const uint64_t* sorted, const int64_t* order,
                                int64_t n, Runs runs) {
  TP_GRID_STRIDE_LOOP(e, count) {
    const uint64_t key = runs.key(e);
    int64_t t = lower_bound(sorted, n, key);
    if (t == n || sorted[t] != key) continue;
    T acc = y[e];
    for (; t < n && sorted[t] == key; ++t) acc += src[runs.source(e, order[t])];
    y[e] = acc;
  }
}

template <class T, class I>
__global__ void index_select_kernel(int64_t count, const T* x, const I* index, int64_t size, int64_t m,
                                    int64_t inner, T* y) {
  TP_GRID_STRIDE_LOOP(e, count) {
    const int64_t i = e % inner, j = e / inner % m, o = e / (inner * m);
    y[e] = x[(o * size + static_cast<int64_t>(index[j])) * inner + i];
  }
}

template <class T, class I>
__global__ void one_hot_kernel(int64_t count, const I* index, int64_t classes, T* y) {
  TP_GRID_STRIDE_LOOP(e, count) y[e] = static_cast<T>(static_cast<int64_t>(index[e / classes]) == e % classes);
}

// The n keys (each ≤ max_key) in stable sorted order, and the position each came from.
struct SortedRuns {
  ScratchBuffer sorted;  // (n,) uint64
  ScratchBuffer order;   // (n,) int64
};

SortedRuns sort_runs(CudaContext& ctx, const uint64_t* keys, int64_t n, uint64_t max_key) {
  SortedRuns runs{ScratchBuffer(ctx.allocator(), static_cast<size_t>(n) * sizeof(uint64_t)),
                  ScratchBuffer(ctx.allocator(), static_cast<size_t>(n) * sizeof(int64_t))};
  stable_sort_order(ctx, keys, static_cast<uint64_t*>(runs.sorted.data()), static_cast<int64_t*>(runs.order.data()),
                    n, bits_for(max_key));
  return runs;
}

// y (count elements) += the runs of src, sorted by keys (n,).
template <class T, class Runs>
void add_runs(CudaContext& ctx, const Tensor& y, const Tensor& src, const uint64_t* keys, int64_t n,
              uint64_t max_key, Runs runs) {
  const SortedRuns sorted = sort_runs(ctx, keys, n, max_key);
  const int64_t count = y.numel();
  add_runs_kernel<<<blocks_for(count), kThreads, 0, ctx.stream()>>>(
      static_cast<T*>(y.raw_data()), count, static_cast<const T*>(src.raw_data()),
      static_cast<const uint64_t*>(sorted.sorted.data()), static_cast<const int64_t*>(sorted.order.data()), n, runs);
  TP_CUDA_CHECK_LAUNCH();
}

}  // namespace

OutOfRange first_out_of_range(const char* op, const Tensor& index, int64_t lo, int64_t hi) {
  return visit_index(index.dtype(), op, [&](auto tag) {
    using I = decltype(tag);
    const int64_t n = index.numel();
    if (n == 0) return OutOfRange{0, 0};
    CudaContext& ctx = active_context(index.device());
    const I* idx = static_cast<const I*>(index.raw_data());
    const int64_t position = first_where(ctx, n, Outside<I>{idx, lo, hi});
    const int64_t value = position < n ? static_cast<int64_t>(read_element(ctx, idx, position)) : 0;
    return OutOfRange{position, value};
  });
}

void gather(const char* op, const Tensor& y, const Tensor& x, int64_t d, const Tensor& index) {
  const int64_t n = index.numel();
  if (n == 0) return;
  const StridedIndexer<1> x_at = addresser(op, index.shape(), x.strides(), d);
  CudaContext& ctx = active_context(y.device());
  visit_all(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    visit_index(index.dtype(), op, [&](auto itag) {
      using I = decltype(itag);
      gather_kernel<<<blocks_for(n), kThreads, 0, ctx.stream()>>>(n, x_at, static_cast<const T*>(x.raw_data()),
                                                                   x.strides()[d], static_cast<const I*>(index.raw_data()),
                                                                   static_cast<T*>(y.raw_data()));
      TP_CUDA_CHECK_LAUNCH();
    });
  });
}

void scatter_add(const char* op, const Tensor& y, int64_t d, const Tensor& index, const Tensor& src) {
  visit_numeric(y.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = index.numel();
    if (n == 0) return;
    CudaContext& ctx = active_context(y.device());
    ScratchBuffer keys(ctx.allocator(), static_cast<size_t>(n) * sizeof(uint64_t));
    const StridedIndexer<1> y_at = addresser(op, index.shape(), y.strides(), d);
    visit_index(index.dtype(), op, [&](auto itag) {
      using I = decltype(itag);
      scatter_keys_kernel<<<blocks_for(n), kThreads, 0, ctx.stream()>>>(
          n, y_at, static_cast<const I*>(index.raw_data()), y.strides()[d], static_cast<uint64_t*>(keys.data()));
      TP_CUDA_CHECK_LAUNCH();
    });
    add_runs<T>(ctx, y, src, static_cast<const uint64_t*>(keys.data()), n, static_cast<uint64_t>(y.numel() - 1),
                ScatterRuns{});
  });
}

void index_select(const char* op, const Tensor& y, const Tensor& x, int64_t d, const Tensor& index) {
  const int64_t count = y.numel();
  if (count == 0) return;
  const Fibers f = fibers_of(x.shape(), d);
  CudaContext& ctx = active_context(y.device());
  visit_all(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    visit_index(index.dtype(), op, [&](auto itag) {
      using I = decltype(itag);
      index_select_kernel<<<blocks_for(count), kThreads, 0, ctx.stream()>>>(
          count, static_cast<const T*>(x.raw_data()), static_cast<const I*>(index.raw_data()), f.size,
          index.numel(), f.inner, static_cast<T*>(y.raw_data()));
      TP_CUDA_CHECK_LAUNCH();
    });
  });
}

void index_add(const char* op, const Tensor& y, int64_t d, const Tensor& index, const Tensor& src) {
  visit_numeric(y.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const int64_t m = index.numel();
    const Fibers f = fibers_of(y.shape(), d);
    if (m == 0 || y.numel() == 0) return;
    CudaContext& ctx = active_context(y.device());
    ScratchBuffer keys(ctx.allocator(), static_cast<size_t>(m) * sizeof(uint64_t));
    visit_index(index.dtype(), op, [&](auto itag) {
      using I = decltype(itag);
      index_keys_kernel<<<blocks_for(m), kThreads, 0, ctx.stream()>>>(m, static_cast<const I*>(index.raw_data()),
                                                                       static_cast<uint64_t*>(keys.data()));
      TP_CUDA_CHECK_LAUNCH();
    });
    add_runs<T>(ctx, y, src, static_cast<const uint64_t*>(keys.data()), m, static_cast<uint64_t>(f.size - 1),
                SliceRuns{f.size, f.inner, m});
  });
}

void one_hot(const Tensor& y, const Tensor& index, int64_t num_classes) {
  const int64_t count = y.numel();
  if (count == 0) return;
  CudaContext& ctx = active_context(y.device());
  visit_all(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    visit_index(index.dtype(), "one_hot", [&](auto itag) {
      using I = decltype(itag);
      one_hot_kernel<<<blocks_for(count), kThreads, 0, ctx.stream()>>>(
          count, static_cast<const I*>(index.raw_data()), num_classes, static_cast<T*>(y.raw_data()));
      TP_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace tapestry::cuda
