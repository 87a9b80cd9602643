#include "nn/attention/full.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/attention.h"
#include "ops/cluster.h"
#include "ops/common.h"
#include "ops/creation.h"
#include "ops/index.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/shape.h"
#include "ops/softmax.h"
#include "ops/sort.h"

namespace tapestry::attention {

QkvShape check_qkv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v) {
  check_same_device(op, {&q, &k, &v});
  check_floating(op, q);
  check_same_dtype(op, q, k);
  check_same_dtype(op, q, v);
  TP_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op,
           "expected q (B, H, N, E), k (B, H, S, E), v (B, H, S, M); got ", to_string(q.shape()),
           ", ", to_string(k.shape()), ", ", to_string(v.shape()));
  const QkvShape s{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), v.size(3)};
  TP_CHECK(k.size(0) == s.B && v.size(0) == s.B && k.size(1) == s.H && v.size(1) == s.H &&
               k.size(3) == s.E && v.size(2) == s.S,
           op, "q ", to_string(q.shape()), ", k ", to_string(k.shape()), ", v ",
           to_string(v.shape()), " do not fit (B, H, N, E), (B, H, S, E), (B, H, S, M)");
  TP_CHECK(s.E > 0, op, "the head dimension E must be positive, got ", to_string(q.shape()));
  return s;
}

Tensor key_keep_mask(const Padding& padding, const QkvShape& s, Device device, const char* op) {
  if (!padding.key_lengths.defined()) return {};
  return reshape(valid_positions(padding.key_lengths, s.B, s.S, device, op), {s.B, 1, 1, s.S});
}

namespace {

// Checks the query lengths and returns the keep-mask of the real keys and, with Causal::Yes (which
// needs N = S), of the keys j ≤ i: (B, 1, 1, S), (1, 1, N, S) or (B, 1, N, S) bool; undefined when
// neither applies.
Tensor keep_mask(const Padding& padding, Causal causal, const QkvShape& s, Device device, const char* op) {
  if (padding.query_lengths.defined()) check_lengths(padding.query_lengths, s.B, s.N, op);
  const Tensor keep = key_keep_mask(padding, s, device, op);
  if (causal == Causal::No) return keep;
  TP_CHECK(s.N == s.S, op, "causal attention needs as many queries as keys, got N = ", s.N, ", S = ", s.S);
  const Tensor tril = causal_keep_mask(s.N, s.S, device);
  return keep.defined() ? logical_and(keep, tril) : tril;
}

}  // namespace

Tensor causal_keep_mask(int64_t N, int64_t S, Device device) {
  // query i keeps key j iff j ≤ i
  const Tensor positions = arange(std::max(N, S), {DType::Int64, device});
  return reshape(le(reshape(slice(positions, 0, 0, S), {1, S}), reshape(slice(positions, 0, 0, N), {N, 1})),
                 {1, 1, N, S});
}

Tensor full_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Padding& padding, Causal causal,
                      Fused fused) {
  const char* op = "full_attention";
  const QkvShape s = check_qkv(op, q, k, v);
  if (fused == Fused::Yes && fused_attention_fits(q, v)) {
    if (padding.query_lengths.defined()) check_lengths(padding.query_lengths, s.B, s.N, op);
    return fused_attention(q, k, v, padding.key_lengths, causal == Causal::Yes);
  }
  const Tensor keep = keep_mask(padding, causal, s, q.device(), op);
  // A = softmax(Q Kᵀ / √E) (eq. 1), V̂ = A V (eq. 2). The 1/√E scales Q (N·E elements) rather
  // than the scores (N·S): the same product, one pass over far less memory forward and backward.
  const Tensor scores = matmul(q * (1.0 / std::sqrt(static_cast<double>(s.E))), transpose(k, -1, -2));
  return matmul(softmax(scores, keep), v);
}

}  // namespace tapestry::attention

namespace tapestry::attention {

Tensor listed_keys_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& indices,
                             const Tensor& mask) {
  const char* op = "listed_keys_attention";
  const QkvShape s = check_qkv(op, q, k, v);
  TP_CHECK(indices.defined() && indices.dtype() == DType::Int64 && indices.dim() == 4 && indices.size(0) == s.B &&
               indices.size(1) == s.H && indices.size(2) == s.N,
           op, "indices must be int64 of shape (", s.B, ", ", s.H, ", ", s.N, ", K), got ",
           indices.defined() ? detail::concat(indices.dtype(), " ", to_string(indices.shape())) : "undefined");
  TP_CHECK(mask.defined() && (mask.dtype() == DType::Bool || mask.dtype() == q.dtype()) && mask.shape() == indices.shape(),
           op, "mask must be bool or ", q.dtype(), " of the indices' shape ", to_string(indices.shape()), ", got ",
           mask.defined() ? detail::concat(mask.dtype(), " ", to_string(mask.shape())) : "undefined");
  const int64_t G = s.B * s.H, K = indices.size(3);
  // Each query is its own cluster of the sparse products: ids = 0..N−1, the lists are (G, N, K).
  const Tensor ids = contiguous(expand(reshape(arange(s.N, {DType::Int64, q.device()}), {1, s.N}), {G, s.N}));
  const Tensor lists = reshape(indices, {G, s.N, K});
  // a_it = softmax_t(q_i · k_{j_t} / √E) over the kept entries; out_i = Σ_t a_it v_{j_t}.
  const Tensor scaled = q * (1.0 / std::sqrt(static_cast<double>(s.E)));
  const Tensor dots = clustered_sparse_dot(reshape(scaled, {G, s.N, s.E}), reshape(k, {G, s.S, s.E}), lists, ids);
  const Tensor weights = softmax(dots, reshape(mask, {G, s.N, K}));
  return reshape(clustered_sparse_weighted_sum(weights, reshape(v, {G, s.S, s.M}), lists, ids), {s.B, s.H, s.N, s.M});
}

Tensor oracle_top_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t topk_keys,
                            const Padding& padding, Causal causal) {
  const char* op = "oracle_top_attention";
  const QkvShape s = check_qkv(op, q, k, v);
  TP_CHECK(topk_keys >= 1, op, "topk must be at least 1, got ", topk_keys);
  const Tensor keep = keep_mask(padding, causal, s, q.device(), op);
  const Tensor visible = contiguous(expand(keep.defined() ? keep : full({1, 1, 1, s.S}, 1.0, {DType::Bool, q.device()}),
                                           {s.B, s.H, s.N, s.S}));
  // The oracle: every exact score, hidden keys at −∞ so that they come last, and each query's top k.
  Sorted top;
  {
    NoGradGuard no_grad;
    const Tensor scores = matmul(q.detach(), transpose(k.detach(), -1, -2));  // the order needs no 1/√E
    top = topk(masked_fill(scores, logical_not(visible), -std::numeric_limits<double>::infinity()),
               std::min(topk_keys, s.S), -1);
  }
  return listed_keys_attention(q, k, v, top.indices, gather(visible, 3, top.indices));
}

}  // namespace tapestry::attention
