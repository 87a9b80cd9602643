/// @file
/// One interface for the sequence encoders a model is built from, and a factory that picks the
/// encoder from the attention config, so that a model never branches on the attention type:
///
///   auto encoder = nn::make_encoder(layer_options, /*num_layers=*/4, gen, {/*mu=*/1e-3, /*nu=*/1e-3});
///   const nn::EncoderOutput out = encoder->encode(x, lengths, gen);   // x (B, N, D)
///   const Tensor loss = out.objective(cross_entropy(head(out.output), target));
///
/// full, clustered and improved-clustered attention give a TransformerEncoder; neural-clustering
/// gives a ClusterFormerEncoder, whose clustering losses are the auxiliary loss µ·L1 + ν·L2 of
/// ClusterFormer eq. 17 (λ = 1 on the task loss).
///
/// Shape letters: B batch, N positions, D model width.
#pragma once

#include <memory>
#include <vector>

#include "core/random.h"
#include "nn/attention/config.h"
#include "nn/attention/neural_clustering.h"
#include "nn/module.h"

namespace tapestry::nn {

struct TransformerLayerOptions;

/// What one encoder layer saw and made, kept for inspection (models/inspection.h): the tensors of the
/// forward pass itself, so that a gradient can be read at them (Tensor::retain_grad) and the
/// clustering measured. The neural-clustering fields are undefined for the other attentions.
struct EncoderLayerTrace {
  Tensor input;            ///< (B, N, D) the layer's input
  Tensor attention_input;  ///< (B, N, D) what the self-attention saw (the input, after norm1 in pre-norm)
  /// neural-clustering: the centroids clustered with, (C, D) (the parameter) or (B, C, D) (Ĉ of the
  /// layer before); undefined for the other kinds
  Tensor centroids;
  /// neural-clustering: what the layer's clustering gave — U (eq. 2), Ĉ (eq. 3), each word's
  /// cluster (eq. 4; C for padding), this layer's L1 (eq. 6) and L2 (eq. 11), unweighted
  /// (nn/attention/neural_clustering.h); undefined tensors for the other kinds
  attention::NeuralClustering clustering;
};

/// What Encoder::encode returns.
struct EncoderOutput {
  Tensor output;    ///< (B, N, D)
  Tensor aux_loss;  ///< 0-d, what the encoder adds to the training objective; undefined when nothing
  std::vector<EncoderLayerTrace> layers;  ///< one per layer, in order; aux_loss is µ Σ L1 + ν Σ L2 of them

  /// task_loss + aux_loss (task_loss alone when there is no auxiliary loss).
  Tensor objective(const Tensor& task_loss) const;
};

/// A stack of encoder layers, whatever its attention (make_encoder builds one).
class Encoder : public Module {
 public:
  /// x (B, N, D); lengths (B) int64 marks padding (undefined: none).
  virtual EncoderOutput encode(const Tensor& x, const Tensor& lengths, Generator& gen) = 0;
  /// The self-attention of every layer from the next forward on, e.g. to evaluate a model trained
  /// with full attention with improved-clustered attention. Throws Error naming the encoder when it
  /// cannot run with `config` (a ClusterFormer runs only with the attention it was built with).
  virtual void set_attention(const attention::AttentionConfig& config) = 0;

 protected:
  using Module::Module;
};

/// The weights µ of L1 and ν of L2 in ClusterFormer eq. 17 (λ, the task loss's, is 1 here).
struct ClusteringLossWeights {
  double mu = 1e-3;     ///< µ, on the clustering loss L1 (eq. 6)
  double nu = 1e-3;     ///< ν, on the centroid sorting loss L2 (eq. 11)
  double lambda = 1.0;  ///< λ, on the task loss (used by ClusterFormerLoss only)
};

/// num_layers layers of options.attention's kind (see the top of this file); `weights` matter only for
/// neural-clustering. Throws Error for options the encoder refuses (nn/transformer.h: check_options).
std::shared_ptr<Encoder> make_encoder(const TransformerLayerOptions& options, int64_t num_layers, Generator& gen,
                                      const ClusteringLossWeights& weights = {});

}  // namespace tapestry::nn
