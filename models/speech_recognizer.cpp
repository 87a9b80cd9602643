#include "models/speech_recognizer.h"

#include "core/tape_graph.h"

#include <vector>

#include "core/creation.h"
#include "core/error.h"
#include "ops/shape.h"
#include "ops/softmax.h"

namespace tapestry::models {

SpeechRecognizer::SpeechRecognizer(const SpeechRecognizerOptions& o, Generator& gen)
    : Module("SpeechRecognizer"), options_(o) {
  TP_CHECK(o.features >= 1 && o.stack >= 1 && o.labels >= 2, name(),
           "features and stack must be at least 1 and labels (the blank included) at least 2, got ", o.features,
           ", ", o.stack, " and ", o.labels);
  const nn::TransformerLayerOptions layer =
      layer_options(name().c_str(), o.encoder);
  input = register_module("input", std::make_shared<nn::Linear>(o.stack * o.features, layer.d_model, gen));
  positions = register_module("positions", std::make_shared<nn::SinusoidalPositionalEncoding>(layer.d_model));
  encoder = register_module("encoder", nn::make_encoder(layer, o.encoder.layers, gen, o.encoder.clustering));
  output = register_module("output", std::make_shared<nn::Linear>(layer.d_model, o.labels, gen));
}

SpeechRecognizer::Output SpeechRecognizer::forward(const Tensor& features, const Tensor& lengths, Generator& gen) {
  TP_CHECK(features.dim() == 3 && features.size(2) == options_.features, name(), "features must be (B, N, ",
           options_.features, "), got ", to_string(features.shape()));
  TP_CHECK(lengths.dim() == 1 && lengths.size(0) == features.size(0), name(), "lengths must be (",
           features.size(0), "), got ", to_string(lengths.shape()));
  const int64_t b = features.size(0), n = features.size(1), s = options_.stack;
  const int64_t positions_n = positions_of(n);
  // Frame stacking: (B, N, F) → (B, N', S·F), zero frames completing the last group.
  const Tensor padded = positions_n * s == n ? features : pad(features, {0, 0, 0, positions_n * s - n});
  const Tensor stacked = reshape(padded, {b, positions_n, s * options_.features});
  std::vector<int64_t> frames = tapestry::to(lengths, Device::cpu()).to_vector<int64_t>();
  for (int64_t& f : frames) f = positions_of(f);
  const Tensor sub_lengths = tapestry::to(from_vector(frames, {b}), lengths.device());
  const Tensor encoder_input = positions->forward(input->forward(stacked));
  const nn::EncoderOutput encoded = [&] {
    const TapeScope scope("encoder");
    return encoder->encode(encoder_input, sub_lengths, gen);
  }();
  return {log_softmax(output->forward(encoded.output)), sub_lengths, encoded.aux_loss, encoded.layers};
}

}  // namespace tapestry::models
