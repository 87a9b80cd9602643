#include "models/sequence_tagger.h"

#include "core/tape_graph.h"

#include "core/error.h"

namespace tapestry::models {

SequenceTagger::SequenceTagger(const SequenceTaggerOptions& o, Generator& gen)
    : Module("SequenceTagger"), options_(o) {
  TP_CHECK(o.vocabulary >= 1 && o.labels >= 1, name(), "vocabulary and labels must be at least 1, got ", o.vocabulary,
           " and ", o.labels);
  const nn::TransformerLayerOptions layer =
      layer_options(name().c_str(), o.encoder);
  embedding = register_module("embedding", std::make_shared<nn::Embedding>(o.vocabulary, layer.d_model, gen));
  positions = register_module("positions", std::make_shared<nn::SinusoidalPositionalEncoding>(layer.d_model));
  encoder = register_module("encoder", nn::make_encoder(layer, o.encoder.layers, gen, o.encoder.clustering));
  output = register_module("output", std::make_shared<nn::Linear>(layer.d_model, o.labels, gen));
}

SequenceTagger::Output SequenceTagger::forward(const Tensor& tokens, const Tensor& lengths, Generator& gen) {
  const Tensor x = positions->forward(embedding->forward(tokens));  // (B, N, D)
  const nn::EncoderOutput encoded = [&] {
    const TapeScope scope("encoder");
    return encoder->encode(x, lengths, gen);
  }();
  return {output->forward(encoded.output), encoded.aux_loss, encoded.layers};
}

}  // namespace tapestry::models
