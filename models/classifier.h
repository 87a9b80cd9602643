/// @file
/// A document classifier: token embedding + sinusoidal positions, an encoder chosen by its attention
/// config (nn/encoder.h; neural-clustering gives the ClusterFormer, whose clustering losses µ·L1 + ν·L2
/// are the auxiliary loss), one vector per document (the mean over its real tokens, or a [CLS]
/// token's output), and a linear map to the classes. `tapestry classify` trains it.
///
/// Shape letters: B documents, N positions (the longest document in the batch), D = heads · head_dim
/// model width, V vocabulary, K classes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/layer_options.h"
#include "nn/encoder.h"
#include "nn/layers.h"
#include "nn/transformer.h"

namespace tapestry::models {

/// How a document's token outputs become one vector.
enum class Pooling {
  Mean,  ///< the mean of the encoder's outputs over the document's real tokens (padding excluded)
  Cls,   ///< the output at a learned [CLS] token put before the document (its id is V, an extra row)
};

/// "mean" or "cls"; throws Error naming the text otherwise.
Pooling parse_pooling(const std::string& name);
std::string to_string(Pooling pooling);  ///< "mean" or "cls" (what parse_pooling reads)

/// The sizes and settings of a Classifier.
struct ClassifierOptions {
  int64_t vocabulary = 0;  ///< V: input tokens are 0..V-1
  int64_t classes = 0;     ///< K
  Pooling pooling = Pooling::Mean;  ///< how a document's outputs become one vector
  EncoderOptions encoder;  ///< its encoder (layer_options.h)
};

/// y[b] = Σ_{n < lengths[b]} x[b, n] / lengths[b]: x (B, N, D) floating, lengths (B) int64 with
/// 1 ≤ lengths[b] ≤ N (undefined: every position counts) → (B, D). Positions at or after a row's
/// length contribute nothing, whatever they hold (even NaN), and receive a zero gradient:
///   dx[b, n] = dy[b] / lengths[b] for n < lengths[b], else 0.
/// Throws Error naming the shapes for a length outside [1, N].
Tensor masked_mean(const Tensor& x, const Tensor& lengths);

/// The document classifier of this file: tokens (B, N) → logits (B, K).
class Classifier : public nn::Module {
 public:
  /// Parameters, drawn from gen in this order: "embedding" (V + 1, D: the last row is [CLS], unused
  /// with mean pooling), "encoder.*", "output" (K, D).
  Classifier(const ClassifierOptions& options, Generator& gen);

  /// What forward returns.
  struct Output {
    Tensor logits;    ///< (B, K)
    Tensor aux_loss;  ///< the encoder's auxiliary loss (neural-clustering), else undefined
    Tensor lengths;   ///< (B) int64, the encoder's real positions ([CLS] included), or undefined: no padding
    std::vector<nn::EncoderLayerTrace> layers;  ///< each encoder layer's tensors (nn/encoder.h), for inspection

    /// task_loss + the auxiliary loss: what training minimises.
    Tensor objective(const Tensor& task_loss) const { return nn::EncoderOutput{logits, aux_loss, {}}.objective(task_loss); }
  };
  /// tokens (B, N) int64 in [0, V); lengths (B) int64 in [1, N] marks padding (undefined: none). A
  /// document's logits do not depend on the padding after it.
  Output forward(const Tensor& tokens, const Tensor& lengths, Generator& gen);

  /// Every layer's self-attention (nn::Encoder::set_attention).
  void set_attention(const attention::AttentionConfig& config) { encoder->set_attention(config); }
  const ClassifierOptions& options() const { return options_; }  ///< its settings

  std::shared_ptr<nn::Embedding> embedding;  ///< (V + 1, D): the token table, row V the [CLS] token
  std::shared_ptr<nn::SinusoidalPositionalEncoding> positions;  ///< added to the embedded tokens
  std::shared_ptr<nn::Encoder> encoder;  ///< the layers (nn::make_encoder)
  std::shared_ptr<nn::Linear> output;  ///< D → K, on the pooled vector

 private:
  ClassifierOptions options_;
};

}  // namespace tapestry::models
