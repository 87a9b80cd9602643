#include "nn/attention/clustered.h"

#include <cmath>
#include <limits>

#include "ops/creation.h"
#include "nn/attention/full.h"
#include "ops/attention.h"
#include "ops/autocast.h"
#include "ops/bits.h"
#include "ops/cluster.h"
#include "ops/common.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/segment.h"
#include "ops/shape.h"
#include "ops/softmax.h"
#include "ops/sort.h"

namespace tapestry::attention {

namespace {

// ids (B, H, N) + the offset of each (batch, head) group, flattened: global cluster ids in
// [0, B·H·(C+1)), with the padding cluster C of every group included.
Tensor global_ids(const Tensor& ids, int64_t C) {
  const int64_t G = ids.size(0) * ids.size(1);
  const Tensor group = reshape(arange(G, {DType::Int64, ids.device()}) * static_cast<double>(C + 1),
                               {ids.size(0), ids.size(1), 1});
  return flatten(ids + group);
}

// Each query's row of a per-cluster tensor (B, H, C, X) -> (B, H, N, X); padded queries get the
// fill value. This is eq. 6's Σ_j S_ij V̂^c_j, as an index_select (whose adjoint is index_add).
Tensor to_queries(const Tensor& per_cluster, const QueryClusters& clusters, double fill = 0.0) {
  const int64_t B = per_cluster.size(0), H = per_cluster.size(1), C = clusters.count, X = per_cluster.size(3);
  const Tensor padded = pad(per_cluster, {0, 0, 0, 1}, fill);  // (B, H, C + 1, X)
  const Tensor rows = index_select(reshape(padded, {-1, X}), 0, global_ids(clusters.ids, C));
  return reshape(rows, {B, H, clusters.ids.size(2), X});
}

// Eq. 3: Q^c_j = Σ_i S_ij Q_i / Σ_i S_ij, per (batch, head) -> (B, H, C, E); 0 for an empty cluster.
Tensor centroids(const Tensor& q, const QueryClusters& clusters) {
  const int64_t B = q.size(0), H = q.size(1), E = q.size(3), C = clusters.count;
  const ClusterLayout layout = cluster_layout(global_ids(clusters.ids, C), B * H * (C + 1));
  const Tensor sorted = index_select(reshape(q, {-1, E}), 0, layout.permutation);
  const Tensor means = reshape(segment_mean(sorted, layout.offsets), {B, H, C + 1, E});
  return slice(means, 2, 0, C);
}

// Each of R rows' own row ids (B·H, R): the sparse ops below with one row per "cluster".
Tensor own_rows(int64_t G, int64_t R, Device device) {
  return contiguous(expand(reshape(arange(R, {DType::Int64, device}), {1, R}), {G, R}));
}

// Σ_{l ∈ T_j} A_jl v_l for each row j of a softmax A (B, H, R, S) whose top-k keys T_j are `indices`
// (B, H, R, k) with weights A_jl, `weights` (B, H, R, k); v (B, H, S, M) -> (B, H, R, M): the part of
// A V on the top keys. Eq. 17's rest is A V minus it, V̂^b_j = Σ_l (1 − T_jl) A_jl v_l =
// (A V)_j − Σ_{l ∈ T_j} A_jl v_l, which needs neither an R × S mask of T nor an R × S copy of A with T
// zeroed. It subtracts: an error of order 2⁻²⁴ |A V|, not of the rest.
Tensor top_keys_part(const Tensor& indices, const Tensor& weights, const Tensor& v) {
  const int64_t B = v.size(0), H = v.size(1), S = v.size(2), M = v.size(3), R = indices.size(2), kk = indices.size(3);
  const Tensor sum = clustered_sparse_weighted_sum(reshape(weights, {B * H, R, kk}), reshape(v, {B * H, S, M}),
                                                   reshape(indices, {B * H, R, kk}), own_rows(B * H, R, v.device()));
  return reshape(sum, {B, H, R, M});
}

void check_clusters(const char* op, const QueryClusters& clusters, const QkvShape& s) {
  TP_CHECK(clusters.count >= 1, op, "needs at least one cluster, got ", clusters.count);
  TP_CHECK(clusters.ids.defined() && clusters.ids.dtype() == DType::Int64 &&
               clusters.ids.shape() == (Shape{s.B, s.H, s.N}),
           op, "cluster ids must be int64 of shape ", to_string({s.B, s.H, s.N}), ", got ",
           clusters.ids.defined() ? to_string(clusters.ids.shape()) : "undefined");
  // Every id in [0, C] (C marks a padded query), checked before it is turned into a row index of the
  // per-cluster tensors, whose own error would name that index, not the caller's id. The check runs
  // on the ids' device; two numbers come back: the first bad id's position (0 when none) and its id.
  const Tensor ids = flatten(clusters.ids);
  if (ids.numel() == 0) return;
  const Tensor bad = logical_or(lt(ids, scalar(0.0, ids.options())), gt(ids, scalar(double(clusters.count), ids.options())));
  const int64_t first = argmax(to(bad, DType::Int64), 0).item<int64_t>();
  const int64_t id = select(ids, 0, first).item<int64_t>();
  TP_CHECK(id >= 0 && id <= clusters.count, op, "clusters.ids holds ", id, " at ", index_string(first, clusters.ids.shape()),
           ", outside [0, ", clusters.count, "] (clusters.count = ", clusters.count, "; the id ", clusters.count,
           " marks a padded query)");
}

// Eq. 4: A^c = softmax(Q^c Kᵀ / √E) over the real keys.
Tensor clustered_weights(const Tensor& q, const Tensor& k, const QueryClusters& clusters, const Padding& padding,
                         const QkvShape& s, const char* op) {
  // 1/√E scales the C centroids, not the C·S scores.
  const Tensor scaled = centroids(q, clusters) * (1.0 / std::sqrt(static_cast<double>(s.E)));
  const Tensor scores = matmul(scaled, transpose(k, -1, -2));
  return softmax(scores, key_keep_mask(padding, s, q.device(), op));
}

// Whether each of the keys `indices` (B, H, R, k) is real, not padding; undefined without key lengths.
Tensor real_keys(const Tensor& indices, const Padding& padding, const QkvShape& s, const char* op) {
  if (!padding.key_lengths.defined()) return {};
  return gather(expand(key_keep_mask(padding, s, indices.device(), op), {s.B, s.H, indices.size(2), s.S}), 3, indices);
}

// What improved-clustered takes from eq. 4's A^c (B, H, C, S): each cluster's top-k keys T_j
// (indices), their weights A^c_jl (eq. 14's terms) and eq. 17's rest Σ_{l ∉ T_j} A^c_jl v_l, each
// (B, H, C, k) or (B, H, C, M).
struct TopKeys {
  Tensor indices, weights, rest;
};

TopKeys top_keys(const Tensor& q, const Tensor& k, const Tensor& v, const QueryClusters& clusters, int64_t kk,
                 const Padding& padding, const QkvShape& s, const char* op) {
  if (!fused_attention_fits(q, v)) {  // A^c itself, held for the backward of its softmax and top-k
    const Tensor attention = clustered_weights(q, k, clusters, padding, s, op);
    const Sorted top = topk(attention, kk, -1);
    return {top.indices, top.values, matmul(attention, v) - top_keys_part(top.indices, top.values, v)};
  }
  // Fused: A^c V and each centroid's log-sum-exp λ_j in one pass over the keys (ops/attention.h), the
  // top keys from scores made without gradient and dropped, and their weights A^c_jl = e^(s_jl − λ_j)
  // from the k dot products: no C × S tensor is held for the backward.
  const int64_t G = s.B * s.H, C = clusters.count;
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.E));
  const Tensor centroid = centroids(q, clusters);
  const AttentionWithLse attended = fused_attention_lse(centroid, k, v, padding.key_lengths);
  constexpr double inf = std::numeric_limits<double>::infinity();
  const Tensor keep = key_keep_mask(padding, s, q.device(), op);  // (B, 1, 1, S) or undefined
  Tensor indices;
  {
    NoGradGuard no_grad;
    const AutocastScope float32(false);  // chosen in float32, as their weights are computed
    Tensor scores = matmul(centroid.detach() * scale, transpose(k.detach(), -1, -2));  // (B, H, C, S)
    if (keep.defined()) scores = masked_fill(scores, logical_not(keep), -inf);
    indices = topk(scores, kk, -1).indices;
  }
  const Tensor dots = reshape(clustered_sparse_dot(reshape(centroid, {G, C, s.E}), reshape(k, {G, s.S, s.E}),
                                                   reshape(indices, {G, C, kk}), own_rows(G, C, q.device())),
                              {s.B, s.H, C, kk});
  Tensor exponent = dots * scale - unsqueeze(attended.lse, 3);
  // A padded key among the k (a sample with fewer than k keys) weighs 0; so does every key of a
  // sample without keys, whose λ is −∞ (filled before the exponential: no ∞ · 0 in the backward).
  if (keep.defined()) exponent = masked_fill(exponent, logical_not(real_keys(indices, padding, s, op)), -inf);
  const Tensor weights = exp(exponent);
  return {indices, weights, attended.out - top_keys_part(indices, weights, v)};
}

void check_clustering_options(const char* op, const Tensor& q, const ClusteringOptions& options) {
  check_floating(op, q);
  TP_CHECK(q.dim() == 4, op, "expected q (B, H, N, E), got ", to_string(q.shape()));
  TP_CHECK(options.clusters >= 1, op, "clusters must be at least 1, got ", options.clusters);
  TP_CHECK(options.bits >= 1 && options.bits <= 63, op, "bits must be in [1, 63], got ", options.bits);
  TP_CHECK(options.iterations >= 0, op, "iterations must be non-negative, got ", options.iterations);
}

}  // namespace

QueryClusters cluster_queries(const Tensor& q, const Tensor& query_lengths, const ClusteringOptions& options,
                              Generator& gen) {
  const char* op = "cluster_queries";
  check_clustering_options(op, q, options);
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), E = q.size(3);
  const Tensor valid = valid_positions(query_lengths, B, N, q.device(), op);  // (B, N)
  NoGradGuard no_grad;
  // §3.2.2: the sign of R random projections (with a bias) of each query, packed into R bits.
  const Tensor planes = randn({options.bits, E}, gen, q.options());
  const Tensor bias = randn({options.bits}, gen, q.options());
  const Tensor codes = pack_sign_bits(matmul(q.detach(), transpose(planes, 0, 1)) + bias);  // (B, H, N)
  const Tensor valid_bhn = contiguous(expand(reshape(valid, {B, 1, N}), {B, H, N}));
  const HammingClusters hc = hamming_kmeans(reshape(codes, {B * H, N}), reshape(valid_bhn, {B * H, N}),
                                            options.clusters, options.bits, options.iterations);
  return {reshape(hc.ids, {B, H, N}), options.clusters};
}

Tensor clustered_attention(const Tensor& q, const Tensor& k, const Tensor& v, const QueryClusters& clusters,
                           const Padding& padding) {
  const char* op = "clustered_attention";
  const QkvShape s = check_qkv(op, q, k, v);
  check_clusters(op, clusters, s);
  // Eq. 5: V̂^c = A^c V; eq. 6: each query takes its cluster's value. Fused where the op takes the
  // head dims (ops/attention.h): the centroids are its queries, and the C × S weights A^c are never held.
  const Tensor values = fused_attention_fits(q, v)
                            ? fused_attention(centroids(q, clusters), k, v, padding.key_lengths)
                            : matmul(clustered_weights(q, k, clusters, padding, s, op), v);
  return to_queries(values, clusters);
}

QueryClusters cluster_queries_causal(const Tensor& q, const Tensor& query_lengths, const ClusteringOptions& options,
                                     Generator& gen) {
  const char* op = "cluster_queries_causal";
  check_clustering_options(op, q, options);
  const int64_t B = q.size(0), N = q.size(2), E = q.size(3), C = options.clusters;
  const Tensor valid = valid_positions(query_lengths, B, N, q.device(), op);  // (B, N)
  NoGradGuard no_grad;
  const Tensor planes = randn({options.bits, E}, gen, q.options());
  const Tensor bias = randn({options.bits}, gen, q.options());
  const Tensor references = randn({C, E}, gen, q.options());
  auto hash = [&](const Tensor& x) { return pack_sign_bits(matmul(x, transpose(planes, 0, 1)) + bias); };
  const Tensor distance = hamming_distance(unsqueeze(hash(q.detach()), 3), reshape(hash(references), {1, 1, 1, C}));
  const Tensor ids = argmin(distance, 3);  // (B, H, N); the first minimum on a tie
  return {where(reshape(valid, {B, 1, N}), ids, full({}, double(C), {DType::Int64, q.device()})), C};
}

Tensor causal_improved_clustered_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                           const QueryClusters& clusters, int64_t topk_keys, const Padding& padding) {
  const char* op = "causal_improved_clustered_attention";
  const QkvShape s = check_qkv(op, q, k, v);
  check_clusters(op, clusters, s);
  TP_CHECK(topk_keys >= 1, op, "topk must be at least 1, got ", topk_keys);
  TP_CHECK(s.N == s.S, op, "causal attention needs as many queries as keys, got N = ", s.N, ", S = ", s.S);
  const Tensor tril = causal_keep_mask(s.N, s.S, q.device());  // (1, 1, N, S): j ≤ i
  const Tensor padded_keys = key_keep_mask(padding, s, q.device(), op);
  const Tensor keep = contiguous(expand(padded_keys.defined() ? logical_and(tril, padded_keys) : tril, {s.B, s.H, s.N, s.S}));

  // Eq. 3 over the prefix: Q^c_i = Σ_{l ≤ i, c(l) = c(i)} q_l / n_i, as a row-normalised (N, N) matmul.
  const Tensor ids = clusters.ids;
  const Tensor members = to(logical_and(eq(unsqueeze(ids, 3), unsqueeze(ids, 2)), tril), q.dtype());  // (B, H, N, N)
  const Tensor centroid = matmul(members / sum(members, {-1}, KeepDim::Yes), q);                     // (B, H, N, E)
  // Eq. 4 per query, over the keys j ≤ i: A^c_i = softmax(Q^c_i Kᵀ / √E).
  const Tensor attention = softmax(matmul(centroid * (1.0 / std::sqrt(static_cast<double>(s.E))), transpose(k, -1, -2)), keep);
  // T_i, m̂_i (eq. 14) per query; hidden keys have A^c = 0 and are never kept by the exact part.
  const Sorted top = topk(attention, std::min(topk_keys, s.S), -1);  // (B, H, N, k)
  const Tensor mass = sum(top.values, {-1}, KeepDim::Yes);           // (B, H, N, 1)
  // Eq. 17: Σ_{j∉T_i} A^c_ij v_j; eq. 13 and 16: m̂_i Σ_{j∈T_i} softmax_T(q_i·k_j/√E) v_j; eq. 15: their sum.
  const Tensor rest = matmul(attention, v) - top_keys_part(top.indices, top.values, v);
  return listed_keys_attention(q, k, v, top.indices, gather(keep, 3, top.indices)) * mass + rest;
}

AttentionRows attention_rows(const Tensor& q_in, const Tensor& k_in, const QueryClusters& clusters,
                             int64_t topk_keys, const Padding& padding) {
  const char* op = "attention_rows";
  const QkvShape s = check_qkv(op, q_in, k_in, k_in);
  check_clusters(op, clusters, s);
  TP_CHECK(topk_keys >= 1, op, "topk must be at least 1, got ", topk_keys);
  NoGradGuard no_grad;
  const Tensor q = q_in.detach(), k = k_in.detach();
  const Tensor keys = key_keep_mask(padding, s, q.device(), op);  // (B, 1, 1, S) or undefined
  const Tensor scores = matmul(q * (1.0 / std::sqrt(static_cast<double>(s.E))), transpose(k, -1, -2));  // (B, H, N, S)
  AttentionRows rows;
  rows.full = softmax(scores, keys);
  // Eq. 4, and the top-k keys T_j of each cluster with their mass m̂_j (eq. 14), as improved_clustered_attention.
  const Tensor per_cluster = clustered_weights(q, k, clusters, padding, s, op);  // (B, H, C, S)
  const Sorted top = topk(per_cluster, std::min(topk_keys, s.S), -1);           // (B, H, C, k)
  const Tensor top_count = scatter_add(zeros(per_cluster.shape(), per_cluster.options()), 3, top.indices,
                                       ones(top.indices.shape(), per_cluster.options()));  // (B, H, C, S)
  rows.clustered = to_queries(per_cluster, clusters);
  rows.in_top = gt(to_queries(top_count, clusters), scalar(0, q.options()));            // (B, H, N, S)
  const Tensor mass = to_queries(sum(top.values, {-1}, KeepDim::Yes), clusters);        // (B, H, N, 1)
  // Eq. 13: on T_j the query's own softmax over its dot products with those keys, scaled by m̂_j;
  // eq. 17: A^c on the other keys.
  const Tensor exact = softmax(scores, keys.defined() ? logical_and(rows.in_top, keys) : rows.in_top) * mass;
  rows.improved = where(rows.in_top, exact, rows.clustered);
  return rows;
}

Tensor improved_clustered_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                    const QueryClusters& clusters, int64_t topk_keys, const Padding& padding) {
  const char* op = "improved_clustered_attention";
  const QkvShape s = check_qkv(op, q_in, k_in, v_in);
  check_clusters(op, clusters, s);
  TP_CHECK(topk_keys >= 1, op, "topk must be at least 1, got ", topk_keys);
  const int64_t kk = std::min(topk_keys, s.S), G = s.B * s.H, C = clusters.count;
  // The sparse ops take (B·H, ·, ·) rows: one contiguous copy of each of q, k and v (heads split from a
  // projection by a permute are not) serves every reshape below, and is all the backward holds of them.
  // Under autocast that copy is float32, as the clustering and softmax compute (ops/autocast.h): each
  // op widening bfloat16 inputs of its own held a float32 copy per op.
  const Tensor q = contiguous(autocast_float32(q_in)), k = contiguous(autocast_float32(k_in)),
               v = contiguous(autocast_float32(v_in));

  // T: the top-k keys of each cluster (B, H, C, k) and their weights; eq. 17: V̂^b_j = Σ_l (1 − T_jl)
  // A^c_jl V_l, once per cluster; eq. 14: m̂_j = Σ_r T_jr A^c_jr.
  const TopKeys top = top_keys(q, k, v, clusters, kk, padding, s, op);
  const Tensor mass = sum(top.weights, {-1}, KeepDim::Yes);  // (B, H, C, 1)
  const Tensor& rest = top.rest;

  // Which of each query's k keys are real (a cluster can have fewer real keys than k); false for padded queries.
  const Tensor keep = padding.key_lengths.defined() ? to_queries(real_keys(top.indices, padding, s, op), clusters)
                                                    : Tensor();
  // Eq. 13: on T_j, query i's own softmax over its dot products with the k keys, scaled by m̂_j; eq. 16:
  // V̂^t_i = Σ_l T_jl A^t_il V_l. Sparse (all queries of a cluster share its k keys), and one op that
  // holds none of the N × k dot products, softmax and weights for the backward (ops/cluster.h).
  const Tensor exact = reshape(
      clustered_sparse_attention(reshape(q, {G, s.N, s.E}), reshape(k, {G, s.S, s.E}), reshape(v, {G, s.S, s.M}),
                                 reshape(top.indices, {G, C, kk}), reshape(clusters.ids, {G, s.N}),
                                 reshape(to_queries(mass, clusters), {G, s.N, 1}),
                                 keep.defined() ? reshape(keep, {G, s.N, kk}) : Tensor()),
      {s.B, s.H, s.N, s.M});
  // Eq. 15: V̂_i = V̂^t_i + V̂^b_i.
  return exact + to_queries(rest, clusters);
}

}  // namespace tapestry::attention
