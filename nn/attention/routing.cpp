#include "nn/attention/routing.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "nn/attention/config.h"
#include "nn/attention/full.h"
#include "ops/autocast.h"
#include "ops/common.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/softmax.h"
#include "ops/sort.h"

namespace tapestry::attention {

namespace {

void check_centroids(const char* op, const Tensor& centroids, const QkvShape& s, const Tensor& q) {
  TP_CHECK(centroids.defined() && centroids.dim() == 3 && centroids.size(0) == s.H && centroids.size(2) == s.E &&
               centroids.size(1) >= 1,
           op, "centroids must be (H, C, E) = (", s.H, ", C ≥ 1, ", s.E, "), got ",
           centroids.defined() ? to_string(centroids.shape()) : "undefined");
  TP_CHECK(centroids.dtype() == q.dtype() && centroids.device() == q.device(), op, "centroids must be ", q.dtype(),
           " on ", q.device(), " like q, got ", centroids.dtype(), " on ", centroids.device());
}

// Each row of x (B, H, L, E) routed to its nearest centroid: argmax_c μ_c · x̂ -> (B, H, L) int64.
Tensor nearest_centroid(const Tensor& x, const Tensor& centroids) {
  return argmax(matmul(unit_rows(x), transpose(unsqueeze(centroids, 0), -1, -2)), -1);
}

// (B, H, L) bool, true at real positions.
Tensor real_positions(const Tensor& lengths, const QkvShape& s, int64_t L, Device device, const char* op) {
  return expand(reshape(valid_positions(lengths, s.B, L, device, op), {s.B, 1, L}), {s.B, s.H, L});
}

}  // namespace

Tensor initial_routing_centroids(int64_t heads, int64_t clusters, int64_t head_dim, Generator& gen, Options options) {
  TP_CHECK(heads >= 1 && clusters >= 1 && head_dim >= 1, "initial_routing_centroids",
           "heads, clusters and head_dim must be positive, got ", heads, ", ", clusters, ", ", head_dim);
  return unit_rows(randn({heads, clusters, head_dim}, gen, options));
}

Tensor routing_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& centroids,
                         const Padding& padding, Causal causal) {
  // Under autocast (ops/autocast.h) routing runs in float32, its centroids' dtype.
  if (autocast_widens({&q, &k, &v}))
    return routing_attention(autocast_float32(q), autocast_float32(k), autocast_float32(v), centroids, padding, causal);
  const char* op = "routing_attention";
  const QkvShape s = check_qkv(op, q, k, v);
  check_centroids(op, centroids, s, q);
  if (padding.query_lengths.defined()) check_lengths(padding.query_lengths, s.B, s.N, op);
  const int64_t C = centroids.size(1);
  const Tensor real_keys = real_positions(padding.key_lengths, s, s.S, q.device(), op);  // (B, H, S)
  Tensor query_cluster, key_cluster;
  {
    NoGradGuard no_grad;  // routing passes no gradient
    query_cluster = nearest_centroid(q.detach(), centroids);  // (B, H, N)
    if (causal == Causal::Yes) key_cluster = nearest_centroid(k.detach(), centroids);  // (B, H, S)
  }
  if (causal == Causal::Yes) {
    TP_CHECK(s.N == s.S, op, "causal attention needs as many queries as keys, got N = ", s.N, ", S = ", s.S);
    // X_i = {j ≤ i : c(k_j) = c(q_i)}, real keys only.
    const Tensor same = eq(unsqueeze(query_cluster, 3), unsqueeze(key_cluster, 2));  // (B, H, N, S)
    const Tensor keep = logical_and(logical_and(same, causal_keep_mask(s.N, s.S, q.device())), unsqueeze(real_keys, 2));
    const Tensor scores = matmul(q * (1.0 / std::sqrt(static_cast<double>(s.E))), transpose(k, -1, -2));
    return matmul(softmax(scores, keep), v);
  }
  // Balanced top-w: the w = ⌈S/C⌉ real keys nearest each centroid (padded keys rank last and are
  // dropped by `keep`), then each query's list is its centroid's.
  const int64_t w = std::max<int64_t>(1, (s.S + C - 1) / C);
  Tensor members;  // (B, H, C, w)
  {
    NoGradGuard no_grad;
    const Tensor affinity = matmul(unsqueeze(centroids, 0), transpose(unit_rows(k.detach()), -1, -2));  // (B, H, C, S)
    const Tensor ranked = masked_fill(affinity, logical_not(unsqueeze(real_keys, 2)), -std::numeric_limits<double>::infinity());
    members = topk(ranked, std::min(w, s.S), -1).indices;
  }
  const int64_t width = members.size(3);
  const Tensor lists = gather(members, 2, expand(unsqueeze(query_cluster, 3), {s.B, s.H, s.N, width}));  // (B, H, N, w)
  const Tensor keep = reshape(gather(contiguous(real_keys), 2, reshape(lists, {s.B, s.H, s.N * width})),
                              {s.B, s.H, s.N, width});
  return listed_keys_attention(q, k, v, lists, keep);
}

Tensor update_routing_centroids(const Tensor& q, const Tensor& k, const Tensor& centroids, const Padding& padding,
                                double decay) {
  if (autocast_widens({&q, &k}))  // in float32 under autocast, as routing_attention
    return update_routing_centroids(autocast_float32(q), autocast_float32(k), centroids, padding, decay);
  const char* op = "update_routing_centroids";
  const QkvShape s = check_qkv(op, q, k, k);
  check_centroids(op, centroids, s, q);
  TP_CHECK(decay >= 0.0 && decay <= 1.0, op, "decay must lie in [0, 1], got ", decay);
  const int64_t C = centroids.size(1);
  NoGradGuard no_grad;
  // Σ of the unit members of each centroid and their count, over the batch: (H, C, E) and (H, C, 1).
  Tensor total = zeros(centroids.shape(), centroids.options());
  Tensor count = zeros({s.H, C, 1}, centroids.options());
  for (const auto& [x, lengths] : {std::pair<Tensor, Tensor>{q.detach(), padding.query_lengths}, {k.detach(), padding.key_lengths}}) {
    const int64_t L = x.size(2);
    const Tensor real = to(unsqueeze(real_positions(lengths, s, L, x.device(), op), 3), x.dtype());  // (B, H, L, 1)
    const Tensor member = one_hot(nearest_centroid(x, centroids), C, x.dtype()) * real;            // (B, H, L, C)
    total = total + sum(matmul(transpose(member, -1, -2), unit_rows(x)), {0});                       // (H, C, E)
    count = count + unsqueeze(sum(member, {0, 2}), 2);                                               // (H, C, 1)
  }
  const double no_limit = std::numeric_limits<double>::infinity();
  const Tensor mean_member = total / clamp(count, 1.0, no_limit);
  const Tensor moved = unit_rows(centroids * decay + mean_member * (1.0 - decay));
  return where(gt(count, scalar(0.0, count.options())), moved, centroids);
}

}  // namespace tapestry::attention
