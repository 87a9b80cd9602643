// CUDA launchers of the segment ops (ops/cuda/segment.cu). Plain C++: ops/segment.cpp validates the
// offsets (or ids) and calls them for tensors on a GPU. Shapes as in ops/segment.h: x (N, D) rows
// (the trailing dims flattened), S segments, offsets (S + 1,) int64 on x's device, contiguous.
//
// Determinism: every output element is computed by one thread, folding its segment's rows in order
// with the CPU's accumulator (double for float32, int64 for integers), so results are bit for bit
// the CPU's. No atomics.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace tapestry::cuda {

// y (S, D) = Σ over each segment's rows of x (N, D); 0 for an empty segment. Numeric.
void segment_sum(const Tensor& y, const Tensor& x, const Tensor& offsets);
// y (S, D) = the maxima over each segment's rows of x (N, D) (the first maximal row, or the first
// NaN), rows (S, D) int64 = the row each came from; 0 and −1 for an empty segment. Numeric.
void segment_max(const Tensor& y, const Tensor& rows, const Tensor& x, const Tensor& offsets);
// dx (N, D), zero-filled: dx[rows[s, i], i] = dy[s, i] where rows[s, i] ≥ 0. Floating.
void segment_max_backward(const Tensor& dx, const Tensor& dy, const Tensor& rows);
// y (N, D): row n = values[segment of n] of values (S, D). Any dtype.
void segment_broadcast(const Tensor& y, const Tensor& values, const Tensor& offsets);

// The first n ≥ 1 with ids[n] < ids[n − 1] of contiguous int64 ids (N,), or N when they are sorted.
// Waits for the device.
int64_t first_descent(const Tensor& ids);
// offsets (S + 1,) of sorted int64 ids (N,) in [0, S): offsets[s] = the first row whose id is ≥ s.
void segment_offsets(const Tensor& offsets, const Tensor& ids, int64_t num_segments);
// The stable counting sort of int64 ids (N,) in [0, C), as a stable CUB radix sort of (id, row)
// pairs: permutation (N,), offsets (C + 1,) and counts (C,), all int64.
void cluster_layout(const Tensor& ids, int64_t num_clusters, const Tensor& permutation, const Tensor& offsets,
                    const Tensor& counts);

}  // namespace tapestry::cuda
