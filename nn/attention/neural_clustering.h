/// @file
/// Neural clustering attention (ClusterFormer, Wang et al. 2022, §3.1–3.2 and appendix B), as one
/// function composed from differentiable ops: the tape gives the backward.
///
/// Shape letters (nn/attention/common.h): B batch, N words (queries and keys), D model dimension,
/// C clusters (the paper's k), H heads, E query/key head dimension, M value head dimension, W block
/// width ⌈N/C⌉.
///
/// What it computes, per sample (the .cpp carries the equations and the readings of the paper):
///   1. cluster the words: XW = X W_C; U = softmax over the real words of C (XW)ᵀ (eq. 2);
///      Ĉ = U XW (eq. 3); each real word goes to argmax of its column of U (eq. 4);
///   2. stably sort the words by cluster (eq. 5) and project the sorted words to Q, K, V (eq. 7);
///   3. cut the sorted sequence into C equal blocks of W words (eq. 8); every query block attends
///      to its own key block and the previous one, the first block's previous being the last
///      (cyclic); softmax(QKᵀ/√E)V per block and head (eq. 9), fused or composed (Fused);
///   4. put the rows back in the original order (eq. 10) and project with W_O;
///   5. return the clustering loss L1 (eq. 6) and the centroid sorting loss L2 (eq. 11), each
///      averaged over the batch, for the caller to weight (appendix C, eq. 17), in the form the
///      caller picks (ClusteringLosses).
///
/// Gradients. The output is differentiable in X, W_Q, W_K, W_V and W_O; the cluster assignment is
/// piecewise constant, so the output passes no gradient to C or W_C (those learn through L1, L2 and
/// through the next layer, which receives Ĉ). L1 and L2 are differentiable in X, C and W_C.
///
/// Padding (lengths). Words at positions ≥ lengths[b] are padding: they are excluded from U, so
/// they neither move a centroid nor enter L1; they get the virtual cluster C (one past the last), so
/// they sort behind every real word whatever their values; they are never attended to. Their values
/// are zeroed on entry, so even non-finite padding cannot reach a real position. The output rows
/// at padded positions are finite but meaningless. A sample of length 0 has Ĉ = 0 and adds 0 to L1.
///
/// Causal::Yes (appendix B) also removes, from each query's softmax, the keys whose original position
/// is after the query's original position. The gradient is then exactly causal. The blocks are not:
/// the assignment (an argmax of U, which is normalised over the whole sequence) depends on later
/// words, so WHICH earlier words a word can see may depend on the future. That is the paper's
/// method; a strictly autoregressive decoder must live with it or cluster differently.
///
/// NaN. A NaN in a real word makes its whole sample's U NaN (softmax over the words), and a NaN in
/// a centroid makes that centroid's row of U NaN; a column of U holding a NaN has no argmax. Such a
/// word is given no cluster: its assignment is −1 (never silently cluster 0), it contributes NaN to
/// L1 (and Ĉ and L2 hold the NaN too), and its output row is NaN, so the NaN reaches the loss and is
/// seen (docs/PORTING.md, "NaN"). Words with −1 sort first (eq. 5); the other samples are unaffected.
///
/// More clusters than words (C > N) is allowed: W = 1, at most N clusters are non-empty, and the
/// blocks past the last word are empty (no queries, every key masked). Empty clusters are fine for
/// any N: blocks are equal chunks of the sorted sequence, not clusters, and an empty cluster's Ĉ_i
/// is still a convex combination of the real words (U's rows sum to 1).
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "nn/attention/common.h"

namespace tapestry::attention {

/// The form of the clustering losses L1 (eq. 6) and L2 (eq. 11). The paper's φ is the inner product,
/// which makes both unbounded below: scaling up W_C or the words lowers them without limit, and with
/// them as an objective the words grow until the task is lost (docs/RESULTS.md measured it). The
/// .cpp gives each form's equation.
enum class ClusteringLosses {
  Projected,  ///< L1 = −(1/N) Σ_j X_j W_C · Ĉ_{I_j} (eq. 6 read in eq. 2's space); L2 = eq. 11
  Printed,    ///< L1 = −(1/N) Σ_j X_j · Ĉ_{I_j}, eq. 6 as printed; L2 = eq. 11
  Cosine,     ///< both on unit-length vectors, each term in [−1, 1]: a departure from the paper
};

/// "projected", "printed" or "cosine".
const char* losses_name(ClusteringLosses losses);
/// The form losses_name gives `name`; throws Error naming `op` and the forms for any other text.
ClusteringLosses losses_from_name(const std::string& name, const std::string& op);

/// All of one floating dtype (float32 or float64), on x's device.
struct NeuralClusteringWeights {
  Tensor w_c;  ///< (D, D)     W_C: the space in which words meet centroids (eq. 2)
  Tensor w_q;  ///< (D, H·E)   W_Q
  Tensor w_k;  ///< (D, H·E)   W_K
  Tensor w_v;  ///< (D, H·M)   W_V
  Tensor w_o;  ///< (H·M, D)   W_O: the output projection after the heads are concatenated
};

/// What neural_clustering_attention returns.
struct NeuralClusteringResult {
  Tensor output;           ///< (B, N, D)  Z W_O, in the original word order
  Tensor centroids;        ///< (B, C, D)  Ĉ, the updated centroids to hand to the next layer
  Tensor clustering_loss;  ///< 0-d        L1 (eq. 6), the mean over the batch
  Tensor sorting_loss;     ///< 0-d        L2 (eq. 11), the mean over the batch
  Tensor assignment;       ///< (B, N) int64: each word's cluster I_j in [0, C); C for padding, −1 for NaN (above)
  Tensor order;            ///< (B, N) int64: I′, sorted position → original position
  Tensor u;                ///< (B, C, N)  U (eq. 2), as NeuralClustering::u
};

/// What neural_clustering returns: the clustering of §3.1 and its losses, without the attention.
struct NeuralClustering {
  Tensor u;                ///< (B, C, N)  U (eq. 2): each centroid's distribution over the real words
  Tensor centroids;        ///< (B, C, D)  Ĉ (eq. 3)
  Tensor assignment;       ///< (B, N) int64: each word's cluster I_j (eq. 4) in [0, C); C for padding, −1 for NaN
  Tensor clustering_loss;  ///< 0-d        L1 (eq. 6), the mean over the batch
  Tensor sorting_loss;     ///< 0-d        L2 (eq. 11), the mean over the batch
};

/// Step 1 and the losses of neural_clustering_attention alone (the same code: the attention calls
/// it), for clustering as a task of its own (ClusterFormer appendix A). x: (B, N, D), B, N ≥ 1;
/// centroids: (C, D) or (B, C, D); w_c: (D, D), or undefined for the identity (clustering in the
/// words' own space); lengths and losses as below. Differentiable in x, centroids and
/// w_c through U and Ĉ (the assignment is piecewise constant). Throws tapestry::Error naming the
/// function on misuse.
NeuralClustering neural_clustering(const Tensor& x, const Tensor& centroids, const Tensor& w_c, const Tensor& lengths,
                                   ClusteringLosses losses);

/// x: (B, N, D) word hidden states, B, N ≥ 1. centroids: (C, D) (a parameter, first layer) or (B, C, D)
/// (the previous layer's Ĉ), C ≥ 1. heads divides the widths of W_Q and W_V. lengths: (B,) int64 or
/// int32 in [0, N], or undefined for no padding. `losses` picks the form of L1 and L2 (above); the
/// output, Ĉ and the assignment do not depend on it. Fused::Yes computes the blocks' attention with
/// fused_attention_ends (ops/attention.h), holding no (W × 2W) scores per block (on a GPU its head
/// dims must fit the fused kernels: fused_attention_fits); Fused::No holds them (the same function,
/// to rounding). Throws tapestry::Error naming the function on misuse.
NeuralClusteringResult neural_clustering_attention(const Tensor& x, const Tensor& centroids,
                                                   const NeuralClusteringWeights& weights, int64_t heads,
                                                   const Tensor& lengths, Causal causal, ClusteringLosses losses,
                                                   Fused fused = Fused::Yes);

}  // namespace tapestry::attention
