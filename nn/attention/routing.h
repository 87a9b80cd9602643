/// @file
/// Routing attention (Roy, Saffar, Vaswani, Grangier, "Efficient Content-Based Sparse Attention with
/// Routing Transformers", TACL 2021), the baseline ClusterFormer compares with.
///
/// Queries and keys are routed to C centroids μ_c (per head) by online k-means on the unit sphere:
/// a query goes to argmax_c μ_c · q̂_i, with q̂ = q / ‖q‖ (keys alike), and attends only to keys of
/// its cluster. The centroids are not trained by gradient: after each training step they move by an
/// exponential moving average towards their members (update_routing_centroids). The scores are the
/// usual q · k / √E; the normalised vectors only route.
///
/// Which keys a cluster holds:
///   - Causal::No, balanced top-w routing (the paper's implementation): each centroid takes the
///     w = ⌈S/C⌉ real keys nearest to it, so every cluster holds w keys (a key may sit in several
///     or in none); the query attends to the w keys of its own centroid. O(N·w·E).
///   - Causal::Yes: the nearest-centroid sets themselves, X_i = {j ≤ i : c(k_j) = c(q_i)} (the
///     paper's definition of the routed attention). Top-w is not causal (a later key nearer the
///     centroid would push an earlier one out), so the causal form is a masked full attention,
///     O(N·S). A query with no key in X_i gets a zero output.
/// With C = 1 both are full attention (causal or not).
///
/// Where the state lives: nn::MultiheadAttention keeps the centroids (H, C, E) as its buffer
/// "routing_centroids" (saved in checkpoints, moved with the layer, never seen by an optimizer) and
/// updates them in train mode after each forward.
#pragma once

#include "core/random.h"
#include "nn/attention/common.h"

namespace tapestry::attention {

/// The moving-average rate λ of the centroids (Roy et al. use 0.999).
constexpr double kRoutingDecay = 0.999;

/// C random unit vectors per head: (H, C, E), float of `options`, from gen.
Tensor initial_routing_centroids(int64_t heads, int64_t clusters, int64_t head_dim, Generator& gen,
                                 Options options = {});

/// Routing attention of q (B, H, N, E) over k (B, H, S, E), v (B, H, S, M) with centroids (H, C, E)
/// -> (B, H, N, M); see the top of this file. Differentiable in q, k and v; the routing itself
/// passes no gradient.
Tensor routing_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& centroids,
                         const Padding& padding = {}, Causal causal = Causal::No);

/// One online k-means step (Roy et al., "Routing attention with online k-means"; that paper is not
/// in papers/): with m_c the mean of the unit queries and keys routed
/// to centroid c (real positions of the whole batch), μ_c ← (λ μ_c + (1 − λ) m_c) / ‖…‖. The paper
/// writes the sums of the members with weight (1 − λ)/2 each for queries and keys; we take their
/// mean so that the step does not grow with the batch, and renormalise so that routing by the dot
/// product stays routing by angle. A centroid with no member keeps its value. Returns the new
/// centroids (H, C, E); no gradient.
Tensor update_routing_centroids(const Tensor& q, const Tensor& k, const Tensor& centroids, const Padding& padding = {},
                                double decay = kRoutingDecay);

}  // namespace tapestry::attention
