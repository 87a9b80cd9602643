/// @file
/// The basic layers: Linear, Embedding, LayerNorm, Dropout, sinusoidal positional encoding and the
/// Transformer's position-wise feed-forward block.
///
/// Shape letters: B batch, N positions, D model width, F feed-forward width, V vocabulary.
/// Every layer is created in float32 on the CPU from an explicit Generator (for the initial values);
/// move it with to(Device) / to(DType). Inputs must have the dtype and device of the parameters; a
/// wrong dtype, device or width throws Error naming the layer.
#pragma once

#include <cstdint>
#include <memory>

#include "core/random.h"
#include "nn/module.h"

namespace tapestry::nn {

/// Whether a Linear layer has a bias.
enum class Bias { No, Yes };

/// y = x Wᵀ + b: (..., in) -> (..., out). weight (out, in), bias (out,), both initialised as in
/// PyTorch (kaiming-uniform with a = √5): uniform in [−1/√in, 1/√in] (0 when in = 0).
class Linear : public Module {
 public:
  /// Initial values from `gen`, as described above; throws Error for negative sizes.
  Linear(int64_t in_features, int64_t out_features, Generator& gen, Bias bias = Bias::Yes);
  Tensor forward(const Tensor& x);  ///< x (..., in) -> (..., out)

  int64_t in_features() const { return in_features_; }  ///< in
  int64_t out_features() const { return out_features_; }  ///< out
  Tensor weight;  ///< (out, in)
  Tensor bias;    ///< (out,), undefined with Bias::No

 private:
  int64_t in_features_, out_features_;
};

/// Rows of a table (V, D) picked by int32 / int64 indices of any shape: indices.shape + (D,).
/// The table starts N(0, 1), as in PyTorch; the row padding_idx (when ≥ 0) starts at zero and never
/// receives a gradient. −1: no padding row.
class Embedding : public Module {
 public:
  /// A table (num_embeddings, embedding_dim) drawn from `gen`.
  Embedding(int64_t num_embeddings, int64_t embedding_dim, Generator& gen, int64_t padding_idx = -1);
  /// Indices (...) -> (..., D); throws Error for an index outside [0, V).
  Tensor forward(const Tensor& indices);

  int64_t num_embeddings() const { return weight.size(0); }  ///< V
  int64_t embedding_dim() const { return weight.size(1); }  ///< D
  int64_t padding_idx() const { return padding_idx_; }  ///< the padding row, or −1
  Tensor weight;  ///< (V, D)

 private:
  int64_t padding_idx_;
};

class Dropout;

/// Layer normalisation over the last dim (of size `dim`), with a learned scale (ones) and shift
/// (zeros): (..., dim) -> (..., dim).
class LayerNorm : public Module {
 public:
  /// Normalises over a last dim of size `dim`; eps is added to the variance.
  explicit LayerNorm(int64_t dim, double eps = 1e-5);
  Tensor forward(const Tensor& x);  ///< x (..., dim) -> (..., dim)
  /// forward(x + dropout.forward(s, gen)), a post-norm residual step, as one op
  /// (dropout_add_layer_norm, ops/norm.h): the same values and draws. x, s (..., dim) of one shape.
  Tensor forward_residual(const Tensor& x, const Tensor& s, const Dropout& dropout, Generator& gen);

  double eps() const { return eps_; }  ///< ε
  Tensor weight;  ///< (dim,)
  Tensor bias;    ///< (dim,)

 private:
  double eps_;
};

/// Dropout with probability p in training mode (ops/dropout.h), the identity in eval mode. The mask
/// is drawn from `gen` (x.numel() counters) only in training mode.
class Dropout : public Module {
 public:
  /// p in [0, 1); throws Error otherwise.
  explicit Dropout(double p);
  /// In training mode x with each element zeroed with probability p and the rest scaled by
  /// 1/(1 − p); x itself in eval mode.
  Tensor forward(const Tensor& x, Generator& gen);
  double p() const { return p_; }  ///< the probability of dropping an element

 private:
  double p_;
};

/// The fixed positional encoding of Vaswani et al. (2017, §3.5), added to x (..., N, D):
///   PE(n, 2i) = sin(n / 10000^(2i/D)),   PE(n, 2i + 1) = cos(n / 10000^(2i/D)).
/// No parameters and no length limit: the table is computed for the longest N seen so far (in
/// float64, then converted once to x's dtype and device) and kept for later calls.
class SinusoidalPositionalEncoding : public Module {
 public:
  /// For a model width D = d_model (positive).
  explicit SinusoidalPositionalEncoding(int64_t d_model);
  /// x + PE[:N], for x (..., N, D) floating (any dtype and device).
  Tensor forward(const Tensor& x);
  /// The table PE (length, d_model) on its own.
  static Tensor table(int64_t length, int64_t d_model, Options options = {});
  int64_t d_model() const { return d_model_; }  ///< D

 private:
  int64_t d_model_;
  Tensor cache_;  ///< (≥ N, D), the dtype and device of the last input
};

/// The feed-forward block's nonlinearity.
enum class Activation { ReLU, GELU };

/// Settings of FeedForward.
struct FeedForwardOptions {
  int64_t d_model = 512;  ///< D
  int64_t d_ff = 2048;    ///< F
  Activation activation = Activation::ReLU;  ///< between the two linear maps
  double dropout = 0.1;   ///< after the activation
};

/// The position-wise feed-forward block: linear2(dropout(activation(linear1(x)))), (..., D) -> (..., D);
/// with relu, relu and dropout run as one op (relu_dropout, ops/dropout.h: the same values).
class FeedForward : public Module {
 public:
  /// Both linear maps initialised from `gen`; throws Error for bad options.
  FeedForward(const FeedForwardOptions& options, Generator& gen);
  Tensor forward(const Tensor& x, Generator& gen);  ///< x (..., D) -> (..., D)
  const FeedForwardOptions& options() const { return options_; }  ///< its settings

  std::shared_ptr<Linear> linear1;  ///< D -> F
  std::shared_ptr<Dropout> dropout;  ///< after the activation
  std::shared_ptr<Linear> linear2;  ///< F -> D

 private:
  FeedForwardOptions options_;
};

}  // namespace tapestry::nn
