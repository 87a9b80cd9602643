/// @file
/// Full (softmax) attention: softmax(Q Kᵀ / √E) V, with key padding and causal masks.
#pragma once

#include "nn/attention/common.h"

namespace tapestry::attention {

/// q (B, H, N, E), k (B, H, S, E), v (B, H, S, M) -> (B, H, N, M).
/// Causal::Yes lets query i see keys j ≤ i (needs N = S). Differentiable in q, k, v (through the
/// composition of matmul, masked softmax and matmul).
Tensor full_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Padding& padding = {},
                      Causal causal = Causal::No);

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
