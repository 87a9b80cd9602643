/// @file
/// A Transformer (or ClusterFormer) that labels every position of a token sequence: token embedding +
/// sinusoidal positions, an encoder chosen by its attention config (nn/encoder.h), and a linear map
/// to the labels. The copy task, sequence reversal and the training benchmark share it.
///
/// Shape letters: B batch, N positions, D = heads · head_dim model width, V vocabulary, K labels.
#pragma once

#include <memory>
#include <vector>

#include "models/layer_options.h"
#include "nn/encoder.h"
#include "nn/layers.h"
#include "nn/transformer.h"

namespace tapestry::models {

/// The sizes and settings of a SequenceTagger.
struct SequenceTaggerOptions {
  int64_t vocabulary = 0;  ///< V: input tokens are 0..V-1
  int64_t labels = 0;      ///< K: one score per label at every position
  EncoderOptions encoder;  ///< its encoder (layer_options.h)
};

/// The sequence tagger of this file: tokens (B, N) → logits (B, N, K).
class SequenceTagger : public nn::Module {
 public:
  /// Parameters, drawn from gen in this order: "embedding" (V, D), "encoder.*", "output" (K, D).
  SequenceTagger(const SequenceTaggerOptions& options, Generator& gen);

  /// What forward returns.
  struct Output {
    Tensor logits;    ///< (B, N, K)
    Tensor aux_loss;  ///< the encoder's auxiliary loss (neural-clustering), else undefined
    std::vector<nn::EncoderLayerTrace> layers;  ///< each encoder layer's tensors (nn/encoder.h), for inspection

    /// task_loss + the auxiliary loss: what training minimises.
    Tensor objective(const Tensor& task_loss) const { return nn::EncoderOutput{logits, aux_loss, {}}.objective(task_loss); }
  };
  /// tokens (B, N) int64; lengths (B) int64 marks padding (undefined: none).
  Output forward(const Tensor& tokens, const Tensor& lengths, Generator& gen);

  /// Every layer's self-attention (nn::Encoder::set_attention).
  void set_attention(const attention::AttentionConfig& config) { encoder->set_attention(config); }
  const SequenceTaggerOptions& options() const { return options_; }  ///< its settings

  std::shared_ptr<nn::Embedding> embedding;  ///< (V, D), the token table
  std::shared_ptr<nn::SinusoidalPositionalEncoding> positions;  ///< added to the embedded tokens
  std::shared_ptr<nn::Encoder> encoder;  ///< the layers (nn::make_encoder)
  std::shared_ptr<nn::Linear> output;  ///< D → K, at every position

 private:
  SequenceTaggerOptions options_;
};

}  // namespace tapestry::models
