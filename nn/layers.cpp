#include "nn/layers.h"

#include <cmath>
#include <vector>

#include "ops/creation.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/matmul.h"
#include "ops/norm.h"
#include "ops/shape.h"

namespace tapestry::nn {

// ---- Linear ----

Linear::Linear(int64_t in_features, int64_t out_features, Generator& gen, Bias with_bias)
    : Module("Linear"), in_features_(in_features), out_features_(out_features) {
  TP_CHECK(in_features >= 0 && out_features >= 0, "Linear", "sizes must be non-negative, got in_features = ",
           in_features, ", out_features = ", out_features);
  // kaiming_uniform_(a = √5): bound = gain·√(3 / fan_in) with gain = √(2 / (1 + a²)), i.e. 1/√fan_in;
  // PyTorch draws the bias from the same bound.
  const double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
  weight = register_parameter("weight", rand({out_features, in_features}, gen) * (2 * bound) - bound);
  if (with_bias == Bias::Yes) bias = register_parameter("bias", rand({out_features}, gen) * (2 * bound) - bound);
}

Tensor Linear::forward(const Tensor& x) {
  check_features(*this, "input", x, weight, 1, in_features_);
  return linear(x, weight, bias);
}

// ---- Embedding ----

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, Generator& gen, int64_t padding_idx)
    : Module("Embedding"), padding_idx_(padding_idx) {
  TP_CHECK(num_embeddings >= 0 && embedding_dim >= 0, "Embedding", "sizes must be non-negative, got num_embeddings = ",
           num_embeddings, ", embedding_dim = ", embedding_dim);
  TP_CHECK(padding_idx >= -1 && padding_idx < num_embeddings, "Embedding", "padding_idx must be -1 (none) or in [0, ",
           num_embeddings, "), got ", padding_idx);
  Tensor table = randn({num_embeddings, embedding_dim}, gen);
  if (padding_idx >= 0) fill_(select(table, 0, padding_idx), 0.0);
  weight = register_parameter("weight", table);
}

Tensor Embedding::forward(const Tensor& indices) {
  TP_CHECK(indices.defined(), name(), "indices is an undefined tensor");
  TP_CHECK(is_integer(indices.dtype()), name(), "indices must be int32 or int64, got ", indices.dtype(), " of shape ",
           to_string(indices.shape()));
  TP_CHECK(indices.device() == weight.device(), name(), "indices are on ", indices.device(),
           " but the table is on ", weight.device());
  return embedding(weight, indices, padding_idx_);
}

// ---- LayerNorm ----

LayerNorm::LayerNorm(int64_t dim, double eps) : Module("LayerNorm"), eps_(eps) {
  TP_CHECK(dim >= 1, "LayerNorm", "dim must be positive, got ", dim);
  TP_CHECK(eps >= 0, "LayerNorm", "eps must be non-negative, got ", eps);
  weight = register_parameter("weight", ones({dim}));
  bias = register_parameter("bias", zeros({dim}));
}

Tensor LayerNorm::forward(const Tensor& x) {
  check_features(*this, "input", x, weight, 1, weight.size(0));
  return layer_norm(x, weight, bias, eps_);
}

Tensor LayerNorm::forward_residual(const Tensor& x, const Tensor& s, const Dropout& dropout, Generator& gen) {
  check_features(*this, "input", x, weight, 1, weight.size(0));
  check_features(*this, "sublayer output", s, weight, 1, weight.size(0));
  return dropout_add_layer_norm(x, s, dropout.p(), gen, dropout.mode(), weight, bias, eps_);
}

// ---- Dropout ----

Dropout::Dropout(double p) : Module("Dropout"), p_(p) {
  TP_CHECK(p >= 0 && p < 1, "Dropout", "the drop probability p must lie in [0, 1), got ", p);
}

Tensor Dropout::forward(const Tensor& x, Generator& gen) {
  TP_CHECK(x.defined() && is_floating(x.dtype()), name(), "input must be a floating tensor, got ",
           x.defined() ? dtype_name(x.dtype()) : "an undefined tensor");
  return dropout(x, p_, gen, mode());
}

// ---- SinusoidalPositionalEncoding ----

SinusoidalPositionalEncoding::SinusoidalPositionalEncoding(int64_t d_model)
    : Module("SinusoidalPositionalEncoding"), d_model_(d_model) {
  TP_CHECK(d_model >= 1, "SinusoidalPositionalEncoding", "d_model must be positive, got ", d_model);
}

Tensor SinusoidalPositionalEncoding::table(int64_t length, int64_t d_model, Options options) {
  TP_CHECK(length >= 0 && d_model >= 1, "SinusoidalPositionalEncoding",
           "needs length ≥ 0 and d_model ≥ 1, got length = ", length, ", d_model = ", d_model);
  std::vector<double> values(static_cast<size_t>(length * d_model));
  for (int64_t n = 0; n < length; ++n) {
    for (int64_t i = 0; i < d_model; i += 2) {
      // 1 / 10000^(2i/D), with i here already the even column 2i
      const double angle = static_cast<double>(n) * std::pow(10000.0, -static_cast<double>(i) / d_model);
      values[n * d_model + i] = std::sin(angle);
      if (i + 1 < d_model) values[n * d_model + i + 1] = std::cos(angle);
    }
  }
  return tapestry::to(tapestry::to(from_vector(values, {length, d_model}), options.dtype), options.device);
}

Tensor SinusoidalPositionalEncoding::forward(const Tensor& x) {
  TP_CHECK(x.defined() && is_floating(x.dtype()), name(), "input must be a floating tensor, got ",
           x.defined() ? dtype_name(x.dtype()) : "an undefined tensor");
  TP_CHECK(x.dim() >= 2 && x.size(-1) == d_model_, name(), "input must be (..., N, ", d_model_, "), got shape ",
           to_string(x.shape()));
  const int64_t n = x.size(-2);
  if (!cache_.defined() || cache_.size(0) < n || cache_.dtype() != x.dtype() || cache_.device() != x.device())
    cache_ = table(std::max<int64_t>(n, cache_.defined() ? cache_.size(0) : 0), d_model_, x.options());
  return x + slice(cache_, 0, 0, n);
}

// ---- FeedForward ----

FeedForward::FeedForward(const FeedForwardOptions& options, Generator& gen) : Module("FeedForward"), options_(options) {
  TP_CHECK(options.d_model >= 1 && options.d_ff >= 1, "FeedForward", "d_model and d_ff must be positive, got ",
           options.d_model, " and ", options.d_ff);
  linear1 = register_module("linear1", std::make_shared<Linear>(options.d_model, options.d_ff, gen));
  dropout = register_module("dropout", std::make_shared<Dropout>(options.dropout));
  linear2 = register_module("linear2", std::make_shared<Linear>(options.d_ff, options.d_model, gen));
}

Tensor FeedForward::forward(const Tensor& x, Generator& gen) {
  check_features(*this, "input", x, linear1->weight, 1, options_.d_model);
  const Tensor h = linear1->forward(x);
  // relu and its dropout as one op (ops/dropout.h): the same bits, without relu's output held or the
  // mask drawn again in the backward
  if (options_.activation == Activation::ReLU)
    return linear2->forward(relu_dropout(h, dropout->p(), gen, dropout->mode()));
  return linear2->forward(dropout->forward(gelu(h), gen));
}

}  // namespace tapestry::nn
