#include "models/classifier.h"

#include "core/tape_graph.h"

#include <vector>

#include "core/error.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/reduce.h"
#include "ops/shape.h"

namespace tapestry::models {

Pooling parse_pooling(const std::string& name) {
  if (name == "mean") return Pooling::Mean;
  if (name == "cls") return Pooling::Cls;
  fail("pooling", "expected mean or cls, got '", name, "'");
}

std::string to_string(Pooling pooling) { return pooling == Pooling::Cls ? "cls" : "mean"; }

Tensor masked_mean(const Tensor& x, const Tensor& lengths) {
  TP_CHECK(x.defined() && x.dim() == 3, "masked_mean", "expected x of shape (B, N, D), got ",
           x.defined() ? tapestry::to_string(x.shape()) : std::string("an undefined tensor"));
  if (!lengths.defined()) return mean(x, {1});
  const int64_t b = x.size(0), n = x.size(1);
  TP_CHECK(lengths.dim() == 1 && lengths.size(0) == b && lengths.dtype() == DType::Int64, "masked_mean",
           "expected lengths (", b, ") int64 for x of shape ", tapestry::to_string(x.shape()), ", got ",
           tapestry::to_string(lengths.shape()), " ", lengths.dtype());
  const std::vector<int64_t> host = lengths.to_vector<int64_t>();
  for (size_t i = 0; i < host.size(); ++i)
    TP_CHECK(host[i] >= 1 && host[i] <= n, "masked_mean", "lengths[", i, "] = ", host[i], " is outside [1, ", n,
             "] for x of shape ", tapestry::to_string(x.shape()));
  const Tensor index = to(arange(n), x.device());                                       // (N)
  const Tensor real = lt(reshape(index, {1, n}), reshape(to(lengths, x.device()), {b, 1}));  // (B, N) bool
  // masked_fill rather than a product with the mask, so that a NaN at a padded position stays out.
  const Tensor kept = masked_fill(x, unsqueeze(logical_not(real), 2), 0.0);              // (B, N, D)
  const Tensor count = reshape(to(to(lengths, x.device()), x.dtype()), {b, 1});           // (B, 1)
  return sum(kept, {1}) / count;
}

Classifier::Classifier(const ClassifierOptions& o, Generator& gen) : Module("Classifier"), options_(o) {
  TP_CHECK(o.vocabulary >= 1 && o.classes >= 1, name(), "vocabulary and classes must be at least 1, got ",
           o.vocabulary, " and ", o.classes);
  const nn::TransformerLayerOptions layer =
      layer_options(name().c_str(), o.encoder);
  embedding = register_module("embedding", std::make_shared<nn::Embedding>(o.vocabulary + 1, layer.d_model, gen));
  positions = register_module("positions", std::make_shared<nn::SinusoidalPositionalEncoding>(layer.d_model));
  encoder = register_module("encoder", nn::make_encoder(layer, o.encoder.layers, gen, o.encoder.clustering));
  output = register_module("output", std::make_shared<nn::Linear>(layer.d_model, o.classes, gen));
}

Classifier::Output Classifier::forward(const Tensor& tokens, const Tensor& lengths, Generator& gen) {
  TP_CHECK(tokens.defined() && tokens.dim() == 2 && tokens.dtype() == DType::Int64, name(),
           "expected tokens (B, N) int64, got ",
           tokens.defined() ? tapestry::to_string(tokens.shape()) : std::string("an undefined tensor"));
  // The [CLS] id V is the model's own: a token id V in the input would pass for it.
  const std::vector<int64_t> ids = tokens.to_vector<int64_t>();
  for (size_t i = 0; i < ids.size(); ++i)
    TP_CHECK(ids[i] >= 0 && ids[i] < options_.vocabulary, name(), "token ", ids[i], " at flat position ", i,
             " is outside the vocabulary [0, ", options_.vocabulary, ")");
  Tensor x = embedding->forward(tokens);  // (B, N, D)
  Tensor real = lengths;
  if (options_.pooling == Pooling::Cls) {
    const int64_t b = tokens.size(0), d = x.size(2);
    const Tensor cls_id = full({1}, double(options_.vocabulary), {DType::Int64, x.device()});
    const Tensor cls = expand(reshape(index_select(embedding->weight, 0, cls_id), {1, 1, d}), {b, 1, d});
    x = concat({cls, x}, 1);  // (B, 1 + N, D)
    if (lengths.defined()) {
      std::vector<int64_t> with_cls = lengths.to_vector<int64_t>();
      for (int64_t& length : with_cls) ++length;
      real = from_vector(with_cls, {b}, lengths.device());
    }
  }
  const nn::EncoderOutput encoded = [&] {
    const TapeScope scope("encoder");
    return encoder->encode(positions->forward(x), real, gen);  // (B, N', D)
  }();
  const Tensor pooled = options_.pooling == Pooling::Cls ? select(encoded.output, 1, 0)  // (B, D)
                                                         : masked_mean(encoded.output, real);
  return {output->forward(pooled), encoded.aux_loss, real, encoded.layers};
}

}  // namespace tapestry::models
