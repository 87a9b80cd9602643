/// @file
/// Fused attention: softmax(Q Kᵀ / √E) V computed tile by tile, never holding the N × S scores.
///
/// The forward takes key tiles in turn and keeps, for each query, a running maximum and sum of the
/// exponentials (the online softmax; FlashAttention, Dao et al. 2022, Algorithm 1); it stores the
/// output and each query's log-sum-exp. The backward recomputes each tile's probabilities from that
/// log-sum-exp and accumulates dQ, dK and dV tile by tile (FlashAttention-2, Dao 2023, Algorithm 2).
/// Memory: the output, one value per query, and a workspace of a fixed number of tiles per thread,
/// whatever N and S are. Arithmetic: that of the unfused composition, plus one recomputed Q Kᵀ in the
/// backward.
#pragma once

#include "core/tensor.h"

namespace tapestry {

/// q (B, H, N, E), k (B, H, S, E), v (B, H, S, M) -> (B, H, N, M); float32, float64 or bfloat16
/// (the float32 kernels on float32 copies made for the call, the output and gradients rounded; the
/// tensors kept for the backward stay bfloat16), one dtype and one device. The same function as the
/// composition matmul(softmax(q Kᵀ / √E, keep), v) of nn/attention/full.h, where `keep` hides:
///   - with key_lengths ((B,) int64 or int32, or undefined: none), the keys j ≥ key_lengths[b];
///   - with causal (which needs N = S), the keys j > i of query i.
/// A query that sees no key gives zeros and passes no gradient (as softmax's fully masked row). On
/// the CPU q, k and v are read where they lie when their last dim is contiguous (heads split from a
/// (B, N, H·E) projection by a permute are not copied), and the output and the gradients of q, k and
/// v are written in those tensors' layout of heads (the heads' merge then takes the output without a
/// copy); a GPU takes contiguous copies and gives contiguous tensors.
/// Differentiable in q, k and v. On a GPU the head dims E and M must not exceed
/// kFusedAttentionMaxHeadDim (fused_attention_fits says whether a call is possible).
Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_lengths = {},
                       bool causal = false);

/// fused_attention's output and each query's log-sum-exp over the keys it sees.
struct AttentionWithLse {
  Tensor out;  ///< (B, H, N, M), as fused_attention
  Tensor lse;  ///< (B, H, N): log Σ_j e^(s_ij), s_ij = q_i · k_j / √E; −∞ for a query that sees no key
};

/// fused_attention that also returns lse, float32 for bfloat16 inputs and their dtype otherwise. Both
/// are differentiable (∂lse_i/∂s_ij = p_ij: the backward adds p_ij · dlse_i to each score's gradient, no
/// more arithmetic). A caller that needs some probabilities p_ij = e^(s_ij − lse_i) of the N × S
/// computes them from lse without holding the rest (improved-clustered's top keys, nn/attention/clustered.cpp).
AttentionWithLse fused_attention_lse(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_lengths = {},
                                     bool causal = false);

/// fused_attention where each query has its own visible keys: query i of sample b sees the keys
/// [0, key_ends[b, i]) (key_ends (B, N), int64 or int32, each in [0, S]) and no others; the same
/// function as the composition with keep[b, :, i, j] = j < key_ends[b, i]. Lengths and the causal
/// mask are its special cases; neural clustering's blocks reach it with each block's keys sorted by
/// position, where a causal query sees a prefix of them (nn/attention/neural_clustering.cpp). On a
/// GPU a key tile is skipped only where no query of the query tile sees it.
Tensor fused_attention_ends(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_ends);

/// fused_attention_ends over keys picked by row: query item b (of q's B) attends to the keys and values
/// k[b / r, :, key_rows[b, j]] and v[b / r, :, key_rows[b, j]], j < S, with r = B / B' (k and v hold
/// B' items of R rows; key_rows (B, S), int64 or int32, each in [0, R), a row picked any number of
/// times), query i seeing the first key_ends[b, i] of them. The same function, values and gradients,
/// as fused_attention_ends on those rows gathered; on the CPU the kernels read them where they lie,
/// so that the picked copies, which are kept for the backward, are never made (neural clustering's
/// blocks pick each slot's keys twice: nn/attention/neural_clustering.cpp). A GPU gathers them and
/// calls fused_attention_ends.
Tensor fused_attention_rows(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_rows,
                            const Tensor& key_ends);

/// The largest head dim (E and M) the GPU kernels take; the CPU takes any.
inline constexpr int64_t kFusedAttentionMaxHeadDim = 128;

/// Whether fused_attention takes q and v's head dims on their device.
bool fused_attention_fits(const Tensor& q, const Tensor& v);

}  // namespace tapestry
