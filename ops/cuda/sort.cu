// CUDA kernels of sort / argsort / topk, and the one place CUB's radix sort is instantiated: the
// sorted-run accumulations of the index, segment and cluster families reach it through
// ops/cuda/radix_sort.cuh, so its heavy templates compile once, for two key types.
//
// A batch of rows (R, L) is sorted in two stable passes over all R·L elements, so that long rows and
// many short rows alike keep the whole GPU busy (a segmented sort gives each row one block):
// 1. by radix_key(x) (ops/cuda/sort.h), with the flat positions as values: every equal key keeps its
//    position order, which is the stable order, and NaN / −0.0 are ordered as on the CPU;
// 2. by row (position / L), with the positions of pass 1 as values: stable again, so within each
//    row the order of pass 1 survives, and row r ends up at [r·L, (r + 1)·L).
// Descending order inverts the key, not the sort: ties still come out in ascending position, as the
// CPU's stable order requires. top-k is the first k of each sorted row, so its ties also go to the
// lower index.
#include "ops/cuda/sort.h"

#include <cub/device/device_radix_sort.cuh>

#include "core/dispatch.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/radix_sort.cuh"

namespace tapestry::cuda {

namespace {

__global__ void iota_kernel(int64_t* out, int64_t n) {
  TP_GRID_STRIDE_LOOP(i, n) out[i] = i;
}

template <class T>
__global__ void radix_keys_kernel(const T* x, int64_t n, Descending descending, RadixKey<T>* keys) {
  TP_GRID_STRIDE_LOOP(i, n) keys[i] = radix_key(x[i], descending);
}

// The row of each position in order (n,), for rows of `length`.
template <class Key>
__global__ void row_keys_kernel(const int64_t* order, int64_t n, int64_t length, Key* rows) {
  TP_GRID_STRIDE_LOOP(t, n) rows[t] = static_cast<Key>(order[t] / length);
}

// Pass 2: order (n,) regrouped stably by row into grouped (n,).
template <class Key>
void group_by_row(CudaContext& ctx, const int64_t* order, int64_t* grouped, int64_t n, int64_t length,
                  int64_t rows) {
  ScratchBuffer keys(ctx.allocator(), static_cast<size_t>(n) * sizeof(Key));
  ScratchBuffer sorted(ctx.allocator(), static_cast<size_t>(n) * sizeof(Key));
  row_keys_kernel<<<blocks_for(n), kThreads, 0, ctx.stream()>>>(order, n, length, static_cast<Key*>(keys.data()));
  TP_CUDA_CHECK_LAUNCH();
  stable_sort_pairs(ctx, static_cast<const Key*>(keys.data()), static_cast<Key*>(sorted.data()), order, grouped,
                    n, bits_for(static_cast<uint64_t>(rows - 1)));
}

// values (R, k), indices (R, k): the first k entries of each row of the grouped order (R, L).
template <class T>
__global__ void take_first_kernel(const T* x, const int64_t* order, int64_t rows, int64_t length, int64_t k,
                                  T* values, int64_t* indices) {
  TP_GRID_STRIDE_LOOP(i, rows * k) {
    const int64_t r = i / k, p = order[r * length + i % k];
    values[i] = x[p];
    indices[i] = p - r * length;
  }
}

}  // namespace

template <class Key>
void stable_sort_pairs(CudaContext& ctx, const Key* keys_in, Key* keys_out, const int64_t* values_in,
                       int64_t* values_out, int64_t n, int end_bit) {
  if (n == 0) return;
  // CUB's two phases: ask for the temporary storage, then sort with it.
  size_t bytes = 0;
  TP_CUB_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys_in, keys_out, values_in, values_out, n, 0,
                                               end_bit, ctx.stream()));
  ScratchBuffer temp(ctx.allocator(), bytes);
  TP_CUB_CHECK(cub::DeviceRadixSort::SortPairs(temp.data(), bytes, keys_in, keys_out, values_in, values_out, n,
                                               0, end_bit, ctx.stream()));
}

template <class Key>
void stable_sort_order(CudaContext& ctx, const Key* keys, Key* sorted, int64_t* order, int64_t n, int end_bit) {
  if (n == 0) return;
  ScratchBuffer positions(ctx.allocator(), static_cast<size_t>(n) * sizeof(int64_t));
  iota_kernel<<<blocks_for(n), kThreads, 0, ctx.stream()>>>(static_cast<int64_t*>(positions.data()), n);
  TP_CUDA_CHECK_LAUNCH();
  stable_sort_pairs(ctx, keys, sorted, static_cast<const int64_t*>(positions.data()), order, n, end_bit);
}

template void stable_sort_pairs<uint32_t>(CudaContext&, const uint32_t*, uint32_t*, const int64_t*, int64_t*,
                                          int64_t, int);
template void stable_sort_pairs<uint64_t>(CudaContext&, const uint64_t*, uint64_t*, const int64_t*, int64_t*,
                                          int64_t, int);
template void stable_sort_order<uint32_t>(CudaContext&, const uint32_t*, uint32_t*, int64_t*, int64_t, int);
template void stable_sort_order<uint64_t>(CudaContext&, const uint64_t*, uint64_t*, int64_t*, int64_t, int);

void sort_rows(const char* op, const Tensor& rows, int64_t k, Descending descending, const Tensor& values,
               const Tensor& indices) {
  visit_numeric(rows.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    using Key = RadixKey<T>;
    const int64_t n = rows.numel(), length = rows.shape().back();
    if (n == 0 || k == 0) return;
    const int64_t count = n / length;  // rows
    CudaContext& ctx = active_context(rows.device());
    const T* x = static_cast<const T*>(rows.raw_data());
    const size_t key_bytes = static_cast<size_t>(n) * sizeof(Key), order_bytes = static_cast<size_t>(n) * sizeof(int64_t);
    ScratchBuffer keys(ctx.allocator(), key_bytes), sorted(ctx.allocator(), key_bytes);
    ScratchBuffer by_key(ctx.allocator(), order_bytes);
    radix_keys_kernel<<<blocks_for(n), kThreads, 0, ctx.stream()>>>(x, n, descending, static_cast<Key*>(keys.data()));
    TP_CUDA_CHECK_LAUNCH();
    stable_sort_order(ctx, static_cast<const Key*>(keys.data()), static_cast<Key*>(sorted.data()),
                      static_cast<int64_t*>(by_key.data()), n, static_cast<int>(8 * sizeof(Key)));
    const int64_t* order = static_cast<const int64_t*>(by_key.data());
    ScratchBuffer by_row(ctx.allocator(), count > 1 ? order_bytes : 0);
    if (count > 1) {
      int64_t* grouped = static_cast<int64_t*>(by_row.data());
      if (static_cast<uint64_t>(count - 1) <= UINT32_MAX) group_by_row<uint32_t>(ctx, order, grouped, n, length, count);
      else group_by_row<uint64_t>(ctx, order, grouped, n, length, count);
      order = grouped;
    }
    take_first_kernel<<<blocks_for(count * k), kThreads, 0, ctx.stream()>>>(
        x, order, count, length, k, static_cast<T*>(values.raw_data()), static_cast<int64_t*>(indices.raw_data()));
    TP_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tapestry::cuda
