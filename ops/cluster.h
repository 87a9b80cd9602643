/// @file
/// Clustering primitives of clustered attention (clustered-attention paper §3.2.2, §3.3, A.2).
///
/// Shapes: G groups (batch × heads), N queries, S keys, E head dim, M value dim, C clusters,
/// k top-k keys per cluster, R hash bits.
#pragma once

#include "core/tensor.h"

namespace tapestry {

/// The result of hamming_kmeans: each query's cluster and the centroids.
struct HammingClusters {
  Tensor ids;        ///< (G, N) int64: the cluster of each query in [0, C); C for an invalid query
  Tensor centroids;  ///< (G, C) int64: the final centroid codes (0 for a cluster never populated)
};

/// K-means in Hamming space over packed R-bit codes (G, N) int64, per group, for queries where
/// `valid` (G, N) bool is true. Initial centroids are the codes of the valid queries at evenly spaced
/// positions ⌊j·n/m⌋, j < m = min(C, n) (n = valid queries of the group, in order); when C > n the
/// remaining clusters start, and stay, empty. Then `iterations` Lloyd iterations, each an update
/// (every centroid bit becomes the majority bit of its members; a tie, or an empty cluster, keeps the
/// old bit) followed by an assignment to the nearest centroid by popcount(code XOR centroid), ties to
/// the lowest cluster index. Deterministic; no gradient.
HammingClusters hamming_kmeans(const Tensor& codes, const Tensor& valid, int64_t clusters,
                               int64_t bits, int64_t iterations);

/// The exact dot products of each query with its cluster's top-k keys (A.2, the sparse product of
/// eq. 13): y[g, i, t] = q[g, i] · key[g, topk[g, ids[g, i], t]]; 0 where ids[g, i] = C (invalid).
/// q (G, N, E), key (G, S, E), topk (G, C, k) int64 in [0, S), ids (G, N) int64 in [0, C] -> (G, N, k).
/// Differentiable in q and key.
Tensor clustered_sparse_dot(const Tensor& q, const Tensor& key, const Tensor& topk, const Tensor& ids);

/// The weighted sum of each query's cluster's top-k values (eq. 16):
/// y[g, i] = Σ_t w[g, i, t] · value[g, topk[g, ids[g, i], t]]; 0 where ids[g, i] = C.
/// w (G, N, k), value (G, S, M), topk (G, C, k), ids (G, N) -> (G, N, M). Differentiable in w and value.
Tensor clustered_sparse_weighted_sum(const Tensor& w, const Tensor& value, const Tensor& topk, const Tensor& ids);

/// Each query's attention over its cluster's top-k keys, scaled by a mass per query (eq. 13 and 16,
/// improved-clustered's exact part): y[g, i] = mass[g, i] Σ_t p_t · value[g, s_t] with s_t =
/// topk[g, ids[g, i], t] and p = softmax_t(q[g, i] · key[g, s_t] / √E) over the t where keep[g, i, t]
/// (all t when keep is undefined; p = 0 where none is kept); 0 where ids[g, i] = C. q (G, N, E),
/// key (G, S, E), value (G, S, M), topk (G, C, k), ids (G, N), mass (G, N, 1) in q's dtype, keep
/// (G, N, k) bool or undefined -> (G, N, M). The same values as the composition clustered_sparse_dot,
/// / √E, softmax, · mass, clustered_sparse_weighted_sum, to the bit; it holds for the backward only its
/// inputs, not the three (G, N, k) tensors between, and makes p again there. Differentiable in q, key,
/// value and mass.
Tensor clustered_sparse_attention(const Tensor& q, const Tensor& key, const Tensor& value, const Tensor& topk,
                                  const Tensor& ids, const Tensor& mass, const Tensor& keep);

}  // namespace tapestry
