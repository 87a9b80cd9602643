// Sorted runs on the device: CUB's stable radix sort of (key, position) pairs, and binary search over
// the sorted keys. The index, sort, segment and cluster families build their deterministic
// accumulations on it: sort the positions by the output they add into (a stable sort keeps equal keys
// in position order), then let one thread per output find its run by binary search and add the run
// in order, so that no two threads ever add into one element and no float atomics are needed.
//
// CUB is instantiated once, in ops/cuda/sort.cu, for unsigned 32- and 64-bit keys with int64
// positions (its radix sort is heavy to compile); every family reaches it through these functions.
#pragma once

#include <cstdint>

#include "ops/cuda/launch.cuh"

namespace tapestry::cuda {

// Sorts n (key, value) pairs by the key bits [0, end_bit), stably (equal keys keep their input
// order). Keys are uint32_t or uint64_t; the four arrays are on ctx's device and must not overlap.
template <class Key>
void stable_sort_pairs(CudaContext& ctx, const Key* keys_in, Key* keys_out, const int64_t* values_in,
                       int64_t* values_out, int64_t n, int end_bit);

// sorted (n,) = keys in ascending order, order (n,) = the position in keys each came from (equal keys
// in position order): stable_sort_pairs of (keys[p], p).
template <class Key>
void stable_sort_order(CudaContext& ctx, const Key* keys, Key* sorted, int64_t* order, int64_t n, int end_bit);

// The number of low bits that hold every value in [0, max]: the end_bit of keys bounded by max.
inline int bits_for(uint64_t max) {
  int bits = 1;
  while (bits < 64 && (max >> bits) != 0) ++bits;
  return bits;
}

// The first t in [0, n) with sorted[t] >= key, or n.
template <class Key>
__device__ __forceinline__ int64_t lower_bound(const Key* sorted, int64_t n, Key key) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// offsets[b] = lower_bound(sorted, n, b) for b ≤ count: with keys in [0, count), run b of the sorted
// keys is [offsets[b], offsets[b + 1]) (empty when b does not occur).
template <class Key>
__global__ void run_offsets_kernel(const Key* sorted, int64_t n, int64_t count, int64_t* offsets) {
  TP_GRID_STRIDE_LOOP(b, count + 1) offsets[b] = lower_bound(sorted, n, static_cast<Key>(b));
}

template <class Key>
void run_offsets(CudaContext& ctx, const Key* sorted, int64_t n, int64_t count, int64_t* offsets) {
  run_offsets_kernel<<<blocks_for(count + 1), kThreads, 0, ctx.stream()>>>(sorted, n, count, offsets);
  TP_CUDA_CHECK_LAUNCH();
}

}  // namespace tapestry::cuda
