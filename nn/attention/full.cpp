#include "nn/attention/full.h"

#include <cmath>

#include "ops/common.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/shape.h"
#include "ops/softmax.h"

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

Tensor full_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Padding& padding, Causal causal) {
  const char* op = "full_attention";
  const QkvShape s = check_qkv(op, q, k, v);
  if (padding.query_lengths.defined()) valid_positions(padding.query_lengths, s.B, s.N, q.device(), op);
  Tensor keep = key_keep_mask(padding, s, q.device(), op);
  if (causal == Causal::Yes) {
    TP_CHECK(s.N == s.S, op, "causal attention needs as many queries as keys, got N = ", s.N, ", S = ", s.S);
    // query i keeps key j iff j ≤ i
    const Tensor positions = arange(s.N, {DType::Int64, q.device()});
    const Tensor tril = reshape(le(reshape(positions, {1, s.S}), reshape(positions, {s.N, 1})), {1, 1, s.N, s.S});
    keep = keep.defined() ? logical_and(keep, tril) : tril;
  }
  // A = softmax(Q Kᵀ / √E) (eq. 1), V̂ = A V (eq. 2). The 1/√E scales Q (N·E elements) rather
  // than the scores (N·S): the same product, one pass over far less memory forward and backward.
  const Tensor scores = matmul(q * (1.0 / std::sqrt(static_cast<double>(s.E))), transpose(k, -1, -2));
  return matmul(softmax(scores, keep), v);
}

}  // namespace tapestry::attention
