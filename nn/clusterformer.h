/// @file
/// ClusterFormer encoder and decoder (Wang et al., ACL 2022): Transformer layers whose
/// self-attention is neural clustering attention (nn/attention/neural_clustering.h), masked in the
/// decoder (appendix B). The first layer's centroids C are
/// a parameter; each layer hands its updated centroids Ĉ to the next (§3.1), and the stack collects
/// every layer's clustering loss L1 (eq. 6) and centroid sorting loss L2 (eq. 11) for the joint
/// objective of appendix C, eq. 17: L_total = µ·L1 + ν·L2 + λ·L_task.
///
/// Shape letters: B batch, N positions, D model width, C clusters (= blocks), H heads.
#pragma once

#include <memory>
#include <vector>

#include "nn/attention/common.h"
#include "nn/transformer.h"

namespace tapestry::nn {

/// What a ClusterFormer layer or encoder returns.
struct ClusterFormerOutput {
  Tensor output;           ///< (B, N, D)
  Tensor centroids;        ///< Ĉ of the last layer (B, C, D)
  Tensor clustering_loss;  ///< L1 summed over the layers, 0-d
  Tensor sorting_loss;     ///< L2 summed over the layers, 0-d
  std::vector<EncoderLayerTrace> layers;  ///< each layer's tensors and its own L1, L2, in order
};

/// One layer: neural clustering self-attention + feed-forward, each in a residual block
/// (options.norm: post- or pre-norm, as TransformerEncoderLayer). options.attention must be
/// neural-clustering; its `clusters` is C. The attention weights W_C (D, D), W_Q, W_K, W_V (D, D) and
/// W_O (D, D) start uniform in ±1/√D.
class ClusterFormerEncoderLayer : public Module {
 public:
  /// Initial values from `gen`; throws Error for bad options, an attention other than
  /// neural-clustering, or a λ other than 1 (which it would have no task loss to apply to).
  ClusterFormerEncoderLayer(const TransformerLayerOptions& options, Generator& gen);
  /// x (B, N, D), centroids (C, D) or (B, C, D); the clustering runs on the layer's input to the
  /// attention (after the norm in pre-norm).
  ClusterFormerOutput forward(const Tensor& x, const Tensor& centroids, const Tensor& lengths,
                              attention::Causal causal, Generator& gen);
  const TransformerLayerOptions& options() const { return options_; }  ///< its settings

  ///@{
  /// W_C, W_Q, W_K, W_V, W_O (D, D): the clustering, query, key, value and output weights
  Tensor w_c, w_q, w_k, w_v, w_o;
  ///@}
  std::shared_ptr<FeedForward> ff;  ///< the feed-forward sublayer
  ///@{
  /// of the attention and the feed-forward residual blocks
  std::shared_ptr<LayerNorm> norm1, norm2;
  ///@}
  ///@{
  /// on the attention's and the feed-forward block's outputs
  std::shared_ptr<Dropout> dropout1, dropout2;
  ///@}

 private:
  TransformerLayerOptions options_;
};

/// num_layers ClusterFormer layers ("layers.0", ...), the initial centroids ("centroids", (C, D),
/// N(0, 1/D) so that the first similarities are O(1)), and for pre-norm a final LayerNorm ("norm").
/// As an Encoder, encode() returns the output and the auxiliary loss µ·L1 + ν·L2 of eq. 17 with the
/// `weights` given here (µ, ν ≥ 0; λ must be 1: the task loss is the caller's, added with weight 1).
class ClusterFormerEncoder : public Encoder {
 public:
  /// Initial values from `gen`; throws Error for bad options, an attention other than
  /// neural-clustering, or a λ other than 1 (which it would have no task loss to apply to).
  ClusterFormerEncoder(const TransformerLayerOptions& options, int64_t num_layers, Generator& gen,
                       const ClusteringLossWeights& weights = {});
  /// x (B, N, D), lengths (B) int64 or undefined: the output and the summed losses L1, L2.
  ClusterFormerOutput forward(const Tensor& x, const Tensor& lengths, Generator& gen,
                              attention::Causal causal = attention::Causal::No);
  /// forward(), with µ·L1 + ν·L2 as the auxiliary loss.
  EncoderOutput encode(const Tensor& x, const Tensor& lengths, Generator& gen) override;
  /// Accepts only the neural-clustering config the encoder was built with: its weights (W_C, the
  /// centroids) belong to it, and another attention would drop them.
  void set_attention(const attention::AttentionConfig& config) override;

  Tensor centroids;  ///< the first layer's centroids (C, D), a parameter
  std::shared_ptr<ModuleList<ClusterFormerEncoderLayer>> layers;  ///< the layers, applied in order
  std::shared_ptr<LayerNorm> norm;  ///< null for post-norm

 private:
  attention::AttentionConfig attention_;
  ClusteringLossWeights weights_;
};

/// A decoder layer (appendix B): masked neural clustering self-attention (Causal::Yes), full attention
/// over the memory, and feed-forward, each in a residual block (options.norm). options.attention
/// must be neural-clustering; options.cross_attention is the attention over the memory. The
/// self-attention weights are initialised as in ClusterFormerEncoderLayer.
class ClusterFormerDecoderLayer : public Module {
 public:
  /// Initial values from `gen`; throws Error for bad options, a self-attention other than
  /// neural-clustering, or a cross-attention MultiheadAttention refuses.
  ClusterFormerDecoderLayer(const TransformerLayerOptions& options, Generator& gen);
  /// x (B, N, D) over memory (B, S, D), centroids (C, D) or (B, C, D); lengths and memory_lengths
  /// (B) int64 or undefined.
  ClusterFormerOutput forward(const Tensor& x, const Tensor& centroids, const Tensor& memory, const Tensor& lengths,
                              const Tensor& memory_lengths, Generator& gen);
  const TransformerLayerOptions& options() const { return options_; }  ///< its settings

  ///@{
  /// W_C, W_Q, W_K, W_V, W_O (D, D) of the masked neural clustering self-attention
  Tensor w_c, w_q, w_k, w_v, w_o;
  ///@}
  std::shared_ptr<MultiheadAttention> cross_attn;  ///< the attention over the memory
  std::shared_ptr<FeedForward> ff;                 ///< the feed-forward sublayer
  ///@{
  /// one per sublayer: self-attention, cross-attention, feed-forward
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;
  std::shared_ptr<Dropout> dropout1, dropout2, dropout3;
  ///@}

 private:
  TransformerLayerOptions options_;
};

/// num_layers ClusterFormer decoder layers ("layers.0", ...), their first centroids ("centroids",
/// as the encoder's) and for pre-norm a final LayerNorm ("norm"). Each layer hands its Ĉ to the next
/// and the losses are summed over the layers, as in the encoder.
///
/// The gradient of position t reaches no input after t, but the clusters (and so which earlier
/// words t attends to) depend on the whole sequence (nn/attention/neural_clustering.h): a prefix
/// decoded step by step is clustered as that prefix, not as the finished sentence was in training.
/// There is therefore no key/value cache: every step runs the decoder over the whole prefix.
class ClusterFormerDecoder : public Module {
 public:
  /// Initial values from `gen`; throws Error as ClusterFormerDecoderLayer, or for num_layers < 1.
  ClusterFormerDecoder(const TransformerLayerOptions& options, int64_t num_layers, Generator& gen);
  /// x (B, N, D) over memory (B, S, D); lengths and memory_lengths (B) int64 or undefined.
  ClusterFormerOutput forward(const Tensor& x, const Tensor& memory, const Tensor& lengths,
                              const Tensor& memory_lengths, Generator& gen);

  Tensor centroids;  ///< the first layer's centroids (C, D), a parameter
  std::shared_ptr<ModuleList<ClusterFormerDecoderLayer>> layers;  ///< the layers, applied in order
  std::shared_ptr<LayerNorm> norm;  ///< null for post-norm
};

/// The joint objective of appendix C, eq. 17: µ·L1 + ν·L2 + λ·task_loss, with µ, ν, λ ≥ 0 (checked
/// when constructed). L1 and L2 are inner products, unbounded below: large µ, ν can pull training
/// away from the task.
class ClusterFormerLoss : public Module {
 public:
  /// Throws Error for a negative weight.
  explicit ClusterFormerLoss(const ClusteringLossWeights& weights = {});
  /// Μ·out.clustering_loss + ν·out.sorting_loss + λ·task_loss, 0-d.
  Tensor forward(const Tensor& task_loss, const ClusterFormerOutput& out) const;
  const ClusteringLossWeights& weights() const { return weights_; }  ///< µ, ν, λ

 private:
  ClusteringLossWeights weights_;
};

}  // namespace tapestry::nn
