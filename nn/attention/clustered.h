/// @file
/// Clustered and improved clustered attention (Vyas, Katharopoulos, Fleuret, NeurIPS 2020).
///
/// Queries are grouped per (batch, head) by LSH + Hamming k-means (§3.2.2); attention is computed
/// once per cluster centroid (§3.2, eq. 3–6); the improved form adds each query's exact attention on
/// its cluster's top-k keys (§3.3, supplementary A.2, eq. 13–17).
///
/// What is defined where the reference implementation is not: C larger than a sample's length
/// leaves the extra clusters empty (their centroid is 0, no query reads it); C = 1 is one centroid,
/// the mean of all real queries; C is not limited by a kernel layout. Padded queries are in no
/// cluster (id C), never counted in a centroid, and get a zero output.
#pragma once

#include <vector>

#include "core/config_text.h"
#include "core/random.h"
#include "nn/attention/common.h"

namespace tapestry::attention {

/// How clustered attention groups the queries (clustered-attention paper §3.2).
struct ClusteringOptions {
  int64_t clusters = 100;  ///< C
  int64_t bits = 63;       ///< R, hash bits, 1..63
  int64_t iterations = 10; ///< L, Lloyd iterations
};

class AttentionConfig;
/// The settings clustered and improved-clustered share (clusters, bits, iterations), with §C.1's
/// defaults C = 100, R = 63, L = 10 (defined in nn/attention/kinds/clustered.cpp).
std::vector<ConfigKey> clustering_settings();
/// The grouping a clustered config names.
ClusteringOptions clustering_options(const AttentionConfig& config);

/// The cluster of each query, from cluster_queries.
struct QueryClusters {
  Tensor ids;        ///< (B, H, N) int64 in [0, C]; C marks a padded query
  int64_t count = 0; ///< C
};

/// Hashes each query of q (B, H, N, E) with R sign random projections with a bias, planes (R, E) and
/// biases (R,) drawn N(0, 1) from gen, then runs L Lloyd iterations of k-means in Hamming space per
/// (batch, head) (ops/cluster.h: hamming_kmeans). No gradient flows through the grouping.
QueryClusters cluster_queries(const Tensor& q, const Tensor& query_lengths, const ClusteringOptions& options,
                              Generator& gen);

/// Clustered attention with given clusters (eq. 3–6): centroids Q^c are the means of their member
/// queries, A^c = softmax(Q^c Kᵀ/√E), V̂^c = A^c V, and each query takes its cluster's V̂^c.
/// q (B, H, N, E), k (B, H, S, E), v (B, H, S, M) -> (B, H, N, M). Gradients reach q through the
/// centroid means (dq_i = dQ^c_j / |cluster j|), k and v through the products.
Tensor clustered_attention(const Tensor& q, const Tensor& k, const Tensor& v, const QueryClusters& clusters,
                           const Padding& padding = {});

/// Causal grouping, for causal_improved_clustered_attention: each query's cluster depends on that
/// query alone. It is hashed as in cluster_queries (R sign random projections with a bias, from gen),
/// C reference codes are the hashes of C random N(0, 1) vectors (also from gen) under the same
/// projections, and the query joins the nearest reference code in Hamming distance (the lowest
/// index on a tie). There are no Lloyd iterations: they move the centroids with every member, later
/// queries included, which would let a query's cluster depend on the future. Padded queries get C.
QueryClusters cluster_queries_causal(const Tensor& q, const Tensor& query_lengths, const ClusteringOptions& options,
                                     Generator& gen);

/// Causal improved clustered attention (needs N = S). The paper defines no causal form; this one
/// keeps eq. 13–17 and lets nothing at a later position reach query i:
///   - the centroid query i sees is the mean of its cluster's members at positions ≤ i (eq. 3 over
///     the prefix; i itself is one, so it is never empty): Q^c_i = Σ_{l ≤ i, c(l) = c(i)} q_l / n_i;
///   - A^c_i = softmax(Q^c_i Kᵀ/√E) over the keys j ≤ i (the cluster's attention over the other keys
///     is masked per query);
///   - the top-k keys T_i of A^c_i, their mass m̂_i, and V̂_i = m̂_i Σ_{j∈T_i} softmax_{T_i}(q_i·k_j/√E) v_j
///     + Σ_{j∉T_i} A^c_ij v_j (eq. 13–17 with per-query T and m̂).
/// The clusters come from cluster_queries_causal (any grouping that depends on each query alone
/// keeps it causal). A centroid per query costs O(N·S) like full attention: this is the reference
/// form that a causal model compares with, not a faster one. With topk ≥ S it is causal full attention.
Tensor causal_improved_clustered_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                           const QueryClusters& clusters, int64_t topk, const Padding& padding = {});

/// Improved clustered attention (eq. 13–17): from A^c each cluster's top-k keys T_j and their mass
/// m̂_j; each query's attention on T_j is its own softmax over those keys scaled by m̂_j, and on the
/// other keys it is A^c. topk ≥ 1 (more than S uses all keys: then this is full attention).
Tensor improved_clustered_attention(const Tensor& q, const Tensor& k, const Tensor& v, const QueryClusters& clusters,
                                    int64_t topk, const Padding& padding = {});

/// The weights each query gives each key under full, clustered and improved clustered attention,
/// as dense rows, to compare the approximations with full attention on real activations.
struct AttentionRows {
  Tensor full;       ///< (B, H, N, S) softmax(Q Kᵀ/√E) over the real keys
  Tensor clustered;  ///< (B, H, N, S) the query's cluster's row of A^c (eq. 4); 0 at a padded query
  Tensor improved;   ///< (B, H, N, S) eq. 13 on the top-k keys of the query's cluster (the query's own
                     ///<               softmax over them, scaled by m̂), A^c on the others (eq. 17)
  Tensor in_top;     ///< (B, H, N, S) bool: key s is one of the top-k keys of the query's cluster
};

/// The rows that clustered_attention and improved_clustered_attention multiply V by (their outputs
/// are rows·V), and full attention's, for q (B, H, N, E), k (B, H, S, E), the given clusters and
/// topk ≥ 1. Proposition 2 of the clustered-attention paper: for every query,
/// ‖improved − full‖₁ ≤ ‖clustered − full‖₁. Dense (B, H, N, S) tensors: meant for inspection, not
/// for long sequences. Records nothing on the tape. Throws Error naming the function on misuse.
AttentionRows attention_rows(const Tensor& q, const Tensor& k, const QueryClusters& clusters, int64_t topk,
                             const Padding& padding = {});

}  // namespace tapestry::attention
