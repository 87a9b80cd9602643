/// @file
/// A CTC speech recogniser after the clustered-attention paper's speech experiments (§4.1): log-mel
/// features, 4× shorter in time by frame stacking, a Transformer (or ClusterFormer) encoder chosen
/// by its attention config (nn/encoder.h) with sinusoidal positions, and a linear map to the labels
/// (phonemes and the CTC blank), log-softmaxed.
///
/// Shape letters: B batch, N frames, F features per frame, S = stack, N' = ⌈N / S⌉ encoder
/// positions, D = heads · head_dim model width, K labels (the blank included).
#pragma once

#include <memory>
#include <vector>

#include "models/layer_options.h"
#include "nn/encoder.h"
#include "nn/layers.h"

namespace tapestry::models {

/// The sizes and settings of a SpeechRecognizer.
struct SpeechRecognizerOptions {
  int64_t features = 40;  ///< F: e.g. mel bins
  int64_t stack = 4;      ///< S: frames stacked into one encoder position
  int64_t labels = 0;     ///< K: the CTC classes, the blank included
  EncoderOptions encoder{4, 4, 32, 512, 0.1, /*attention=*/{}, /*clustering=*/{}};  ///< its encoder (layer_options.h)
};

/// The CTC speech recogniser of this file: features (B, N, F) → log-probabilities (B, N', K).
class SpeechRecognizer : public nn::Module {
 public:
  /// Parameters, drawn from gen in this order: "input" (D, S·F), "encoder.*", "output" (K, D).
  /// Throws Error naming SpeechRecognizer for sizes below 1 (labels below 2: a blank and one label).
  SpeechRecognizer(const SpeechRecognizerOptions& options, Generator& gen);

  /// What forward returns.
  struct Output {
    Tensor log_probs;  ///< (B, N', K) log-probabilities per encoder position
    Tensor lengths;    ///< (B) int64: ⌈length / S⌉, the positions holding real frames
    Tensor aux_loss;   ///< the encoder's auxiliary loss (neural-clustering), else undefined
    std::vector<nn::EncoderLayerTrace> layers;  ///< each encoder layer's tensors (nn/encoder.h), for inspection

    /// task_loss + the auxiliary loss: what training minimises.
    Tensor objective(const Tensor& task_loss) const { return nn::EncoderOutput{log_probs, aux_loss, {}}.objective(task_loss); }
  };
  /// features (B, N, F) float32, zero after each row's length; lengths (B) int64 in frames.
  /// Frames n·S … n·S + S − 1 are concatenated into position n (the last one zero-padded), mapped
  /// to D by "input", and the sinusoidal positions added; positions at or after a row's ⌈length / S⌉
  /// are masked in attention.
  Output forward(const Tensor& features, const Tensor& lengths, Generator& gen);

  /// The encoder positions of an utterance of `frames` frames: ⌈frames / S⌉.
  int64_t positions_of(int64_t frames) const { return (frames + options_.stack - 1) / options_.stack; }

  /// Every layer's self-attention (nn::Encoder::set_attention).
  void set_attention(const attention::AttentionConfig& config) { encoder->set_attention(config); }
  const SpeechRecognizerOptions& options() const { return options_; }  ///< its settings

  std::shared_ptr<nn::Linear> input;  ///< S·F → D, on each position's stacked frames
  std::shared_ptr<nn::SinusoidalPositionalEncoding> positions;  ///< added to the output of `input`
  std::shared_ptr<nn::Encoder> encoder;  ///< the layers (nn::make_encoder)
  std::shared_ptr<nn::Linear> output;  ///< D → K, before the log-softmax

 private:
  SpeechRecognizerOptions options_;
};

}  // namespace tapestry::models
