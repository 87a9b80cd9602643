#include "nn/attention/local.h"

#include <algorithm>

#include "nn/attention/full.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/shape.h"

namespace tapestry::attention {

Tensor local_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t window, const Padding& padding,
                       Causal causal) {
  const char* op = "local_attention";
  const QkvShape s = check_qkv(op, q, k, v);
  TP_CHECK(window >= 0, op, "window must be non-negative, got ", window);
  TP_CHECK(s.N == s.S, op, "local attention aligns query i with key i, so it needs as many queries as keys, got N = ",
           s.N, ", S = ", s.S);
  if (padding.query_lengths.defined()) check_lengths(padding.query_lengths, s.B, s.N, op);
  const int64_t N = s.N, W = std::min(window, std::max<int64_t>(N - 1, 0));
  const int64_t K = causal == Causal::Yes ? W + 1 : 2 * W + 1;  // keys per query
  // Query i's t-th key is j = i − W + t; the ones outside [0, N) are listed as 0 and masked out.
  const Options longs{DType::Int64, q.device()};
  const Tensor j = reshape(arange(N, longs), {N, 1}) + reshape(arange(double(-W), double(K - W), 1.0, longs), {1, K});
  Tensor keep = logical_and(ge(j, zeros({1}, longs)), lt(j, full({1}, double(N), longs)));  // (N, K)
  const Tensor listed = masked_fill(j, logical_not(keep), 0.0);
  if (padding.key_lengths.defined()) {
    const Tensor real = valid_positions(padding.key_lengths, s.B, N, q.device(), op);  // (B, N)
    const Tensor real_listed = gather(real, 1, contiguous(expand(reshape(listed, {1, N * K}), {s.B, N * K})));
    keep = logical_and(reshape(keep, {1, 1, N, K}), reshape(real_listed, {s.B, 1, N, K}));
  }
  const std::vector<int64_t> lists{s.B, s.H, N, K};
  return listed_keys_attention(q, k, v, contiguous(expand(reshape(listed, {1, 1, N, K}), lists)),
                               contiguous(expand(keep.dim() == 2 ? reshape(keep, {1, 1, N, K}) : keep, lists)));
}

}  // namespace tapestry::attention
