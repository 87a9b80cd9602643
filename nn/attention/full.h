/// @file
/// Full (softmax) attention: softmax(Q Kᵀ / √E) V, with key padding and causal masks; the
/// clustered-attention paper's oracle-top (each query keeps its k highest-scoring keys, §4.1,
/// Table 1); and attention over a given list of keys per query, which the sparse attentions share.
#pragma once

#include "nn/attention/common.h"

namespace tapestry::attention {

/// q (B, H, N, E), k (B, H, S, E), v (B, H, S, M) -> (B, H, N, M).
/// Causal::Yes lets query i see keys j ≤ i (needs N = S). Differentiable in q, k, v. Fused::Yes runs
/// ops/attention.h's fused kernel where it takes the head dims (fused_attention_fits), the
/// composition elsewhere.
Tensor full_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Padding& padding = {},
                      Causal causal = Causal::No, Fused fused = Fused::No);

/// Oracle-top attention (clustered-attention paper §4.1, Table 1): each query computes its exact
/// scores with every key, keeps the `topk` highest (ties to the lower key index) and takes the
/// softmax over those alone. Padded keys, and with Causal::Yes keys after the query, are never
/// picked; a query with fewer visible keys than topk keeps all it sees, so topk ≥ S is full
/// attention. Shapes as full_attention. The choice of keys passes no gradient; q, k and v get the
/// gradients of the softmax over the kept keys.
Tensor oracle_top_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t topk,
                            const Padding& padding = {}, Causal causal = Causal::No);

/// Attention of each query over its own list of keys: query i of (b, h) takes the softmax of
/// q_i · k_j / √E over the keys j = indices[b, h, i, t] that `mask` keeps, and the weighted sum of
/// their values. q (B, H, N, E), k (B, H, S, E), v (B, H, S, M), indices (B, H, N, K) int64 in
/// [0, S) -> (B, H, N, M). mask (B, H, N, K) is as softmax's (ops/softmax.h): bool (true = keep) or
/// additive in q's dtype (−inf drops an entry). A key listed twice counts twice. A row that keeps
/// nothing gives zeros. Differentiable in q, k, v; runs on the sparse products of ops/cluster.h
/// (each query its own cluster), so it costs O(N·K·E), not O(N·S·E).
Tensor listed_keys_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& indices,
                             const Tensor& mask);

/// The (1, 1, N, S) bool mask of a causal attention, true where key j ≤ query i.
Tensor causal_keep_mask(int64_t N, int64_t S, Device device);

/// Checks q, k, v as above and returns (B, H, N, S, E, M); `op` names the caller in errors.
struct QkvShape {
  ///@{
  /// Batch, heads, queries, keys, query/key head dimension, value head dimension.
  int64_t B, H, N, S, E, M;
  ///@}
};
/// Throws Error from `op` unless q, k, v fit the shapes above.
QkvShape check_qkv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v);

/// The (B, 1, 1, S) bool keep-mask of real keys; undefined when there is no key padding.
Tensor key_keep_mask(const Padding& padding, const QkvShape& s, Device device, const char* op);

}  // namespace tapestry::attention
