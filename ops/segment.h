/// @file
/// Segment ops: reductions over contiguous runs of rows, and their adjoint, the broadcast back.
/// These are the aggregate ↔ broadcast pair that clustering is built on: with the queries sorted by
/// cluster, centroids are segment_mean(Q, offsets) and every query takes its cluster's value with
/// segment_broadcast(V^c, offsets).
///
/// Shapes: x (N, ...) rows, S segments, offsets (S + 1,).
/// Representation: offsets, int64 (or int32), with offsets[0] = 0, non-decreasing, offsets[S] = N;
/// segment s is rows [offsets[s], offsets[s + 1]) of x, and may be empty. segment_offsets converts a
/// sorted segment-id vector; cluster_layout produces the permutation that sorts rows by cluster and
/// the offsets of the sorted rows. Invalid offsets are refused with an Error naming the op.
/// Every op is deterministic: each output is reduced by one thread, over its rows in order.
#pragma once

#include "core/tensor.h"

namespace tapestry {

/// offsets (S + 1,) int64 of a sorted (non-decreasing) id vector ids (N,) int32/int64 with values in
/// [0, num_segments): segment s is the run of rows whose id is s (empty when s does not occur).
Tensor segment_offsets(const Tensor& ids, int64_t num_segments);

/// y[s] = Σ_{n in segment s} x[n]: (N, ...) -> (S, ...); 0 for an empty segment.
/// dx = segment_broadcast(dy, offsets).
Tensor segment_sum(const Tensor& x, const Tensor& offsets);
/// y[s] = segment_sum(x)[s] / |segment s| (floating x); 0 for an empty segment.
Tensor segment_mean(const Tensor& x, const Tensor& offsets);
/// y[s] = max_{n in segment s} x[n], elementwise over the trailing dims. An empty segment gives 0,
/// not −inf: a finite value that cannot poison a later product (and that matches sum and mean).
/// The gradient goes to the first maximal row of each element (ties are not shared; NaN counts as
/// the maximum and propagates).
Tensor segment_max(const Tensor& x, const Tensor& offsets);
/// y[n] = values[s] for every row n of segment s: (S, ...) -> (N, ...), N = offsets[S].
/// dvalues = segment_sum(dy, offsets).
Tensor segment_broadcast(const Tensor& values, const Tensor& offsets);

/// How rows fall into clusters, for ids (N,) int32/int64 in [0, num_clusters):
struct ClusterLayout {
  Tensor permutation;  ///< (N,) int64: the rows sorted by cluster, stably (row order kept within one)
  Tensor offsets;      ///< (C + 1,) int64: cluster c is permutation[offsets[c] : offsets[c + 1]]
  Tensor counts;       ///< (C,) int64: the size of each cluster (0 for an empty one)
};
/// For x (N, ...): xs = index_select(x, 0, permutation) has its rows grouped by cluster, so
/// segment_mean(xs, offsets) are the centroids, and index_add(zeros, 0, permutation, ys) puts
/// rows of ys back in the original order. Batched ids (B, N) can use ids + b·C to get one layout.
ClusterLayout cluster_layout(const Tensor& ids, int64_t num_clusters);

}  // namespace tapestry
