/// @file
/// Transformer encoder and decoder layers (Vaswani et al., 2017) and their stacks.
///
/// Shape letters: B batch, N positions (target positions in the decoder), S memory positions,
/// D model width, F feed-forward width.
///
/// Residual blocks, with sublayer f (self-attention, cross-attention, feed-forward):
///   NormPosition::Post (the paper's):  x ← norm(x + dropout(f(x)))
///   NormPosition::Pre:                 x ← x + dropout(f(norm(x)))
/// A pre-norm stack ends with one more LayerNorm ("norm"), since its residual stream is never
/// normalised otherwise; a post-norm stack has none.
///
/// Padding is given by lengths (B,) int64 (positions ≥ lengths[b] are padding; undefined: none), as in
/// nn/attention/common.h. Padded positions never influence real ones; their outputs are meaningless.
/// gen feeds dropout (training mode) and the hashing of clustered attention (both modes).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/random.h"
#include "nn/layers.h"
#include "nn/module.h"
#include "nn/encoder.h"
#include "nn/multihead_attention.h"

namespace tapestry::nn {

enum class NormPosition { Post, Pre };

struct TransformerLayerOptions {
  int64_t d_model = 512;  ///< D
  int64_t heads = 8;      ///< H, divides D
  int64_t d_ff = 2048;    ///< F
  double dropout = 0.1;   ///< on every sublayer's output, and inside the feed-forward block
  Activation activation = Activation::ReLU;
  NormPosition norm = NormPosition::Post;
  double layer_norm_eps = 1e-5;
  attention::AttentionConfig attention;        ///< self-attention (full by default)
  attention::AttentionConfig cross_attention;  ///< the decoder's attention over the memory (decoder only)
};

/// Checks shared by the layers built from these pieces (here and in nn/clusterformer.h): positive
/// sizes, heads dividing d_model, dropout in [0, 1), num_layers ≥ 1; errors name `layer`.
void check_options(const char* layer, const TransformerLayerOptions& options, int64_t num_layers = 1);
FeedForwardOptions feed_forward_options(const TransformerLayerOptions& options);
/// x must be (B, N, d_model) with the dtype and device of `like` (a parameter of the layer).
void check_sequence(const Module& layer, const char* what, const Tensor& x, const Tensor& like, int64_t d_model);

/// One residual block around `sublayer`, as above: Post gives norm(x + dropout(sublayer(x))), Pre gives
/// x + dropout(sublayer(norm(x))). The layers below are built from it; so can other layers (the
/// ClusterFormer encoder layer).
Tensor residual(NormPosition position, const Tensor& x, LayerNorm& norm, Dropout& dropout, Generator& gen,
                const std::function<Tensor(const Tensor&)>& sublayer);

/// Self-attention + feed-forward: x (B, N, D) -> (B, N, D).
class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(const TransformerLayerOptions& options, Generator& gen);
  Tensor forward(const Tensor& x, const Tensor& lengths, Generator& gen);
  /// The self-attention from the next forward on (the weights stay).
  void set_attention(const attention::AttentionConfig& config);
  void set_attention(const std::string& config);  ///< parsed by AttentionConfig::parse
  const TransformerLayerOptions& options() const { return options_; }

  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<FeedForward> ff;
  std::shared_ptr<LayerNorm> norm1, norm2;  ///< before / after self_attn, ff (see the top of this file)
  std::shared_ptr<Dropout> dropout1, dropout2;

 private:
  TransformerLayerOptions options_;
};

/// Causal self-attention + cross-attention over the memory + feed-forward:
/// x (B, N, D), memory (B, S, D) -> (B, N, D). Output position t depends on x only through
/// positions ≤ t. The self-attention must be full (the clustered types have no causal form); the
/// cross-attention may be any type MultiheadAttention runs.
class TransformerDecoderLayer : public Module {
 public:
  TransformerDecoderLayer(const TransformerLayerOptions& options, Generator& gen);
  Tensor forward(const Tensor& x, const Tensor& memory, const Tensor& lengths, const Tensor& memory_lengths,
                 Generator& gen);
  void set_self_attention(const attention::AttentionConfig& config);
  void set_cross_attention(const attention::AttentionConfig& config);
  void set_self_attention(const std::string& config);  ///< parsed by AttentionConfig::parse
  void set_cross_attention(const std::string& config);
  const TransformerLayerOptions& options() const { return options_; }

  std::shared_ptr<MultiheadAttention> self_attn, cross_attn;
  std::shared_ptr<FeedForward> ff;
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;
  std::shared_ptr<Dropout> dropout1, dropout2, dropout3;

 private:
  TransformerLayerOptions options_;
};

/// num_layers encoder layers ("layers.0", ...) and, for pre-norm, a final LayerNorm ("norm").
class TransformerEncoder : public Encoder {
 public:
  TransformerEncoder(const TransformerLayerOptions& options, int64_t num_layers, Generator& gen);
  Tensor forward(const Tensor& x, const Tensor& lengths, Generator& gen);
  /// forward(x, lengths, gen) with no auxiliary loss.
  EncoderOutput encode(const Tensor& x, const Tensor& lengths, Generator& gen) override;
  /// Every layer's self-attention, e.g. to evaluate a model trained with full attention with
  /// improved-clustered attention.
  void set_attention(const attention::AttentionConfig& config) override;
  void set_attention(const std::string& config);  ///< parsed by AttentionConfig::parse

  std::shared_ptr<ModuleList<TransformerEncoderLayer>> layers;
  std::shared_ptr<LayerNorm> norm;  ///< null for post-norm
};

/// num_layers decoder layers ("layers.0", ...) and, for pre-norm, a final LayerNorm ("norm").
class TransformerDecoder : public Module {
 public:
  TransformerDecoder(const TransformerLayerOptions& options, int64_t num_layers, Generator& gen);
  Tensor forward(const Tensor& x, const Tensor& memory, const Tensor& lengths, const Tensor& memory_lengths,
                 Generator& gen);
  void set_self_attention(const attention::AttentionConfig& config);
  void set_cross_attention(const attention::AttentionConfig& config);
  void set_self_attention(const std::string& config);  ///< parsed by AttentionConfig::parse
  void set_cross_attention(const std::string& config);

  std::shared_ptr<ModuleList<TransformerDecoderLayer>> layers;
  std::shared_ptr<LayerNorm> norm;  ///< null for post-norm
};

}  // namespace tapestry::nn
