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
#include <vector>

#include "core/random.h"
#include "nn/layers.h"
#include "nn/module.h"
#include "nn/encoder.h"
#include "nn/multihead_attention.h"

namespace tapestry::nn {

/// Where a residual block's LayerNorm sits: after the residual sum (Post, the original Transformer)
/// or before the sublayer (Pre).
enum class NormPosition { Post, Pre };

/// Settings of the Transformer layers and of the encoders make_encoder builds.
struct TransformerLayerOptions {
  int64_t d_model = 512;  ///< D
  int64_t heads = 8;      ///< H, divides D
  int64_t d_ff = 2048;    ///< F
  double dropout = 0.1;   ///< on every sublayer's output, and inside the feed-forward block
  Activation activation = Activation::ReLU;  ///< the feed-forward block's nonlinearity
  NormPosition norm = NormPosition::Post;  ///< where the LayerNorms sit
  double layer_norm_eps = 1e-5;  ///< ε of every LayerNorm
  attention::AttentionConfig attention;        ///< self-attention (full by default)
  attention::AttentionConfig cross_attention;  ///< the decoder's attention over the memory (decoder only)
};

/// Checks shared by the layers built from these pieces (here and in nn/clusterformer.h): positive
/// sizes, heads dividing d_model, dropout in [0, 1), num_layers ≥ 1; errors name `layer`.
void check_options(const char* layer, const TransformerLayerOptions& options, int64_t num_layers = 1);
/// The feed-forward block's settings within `options`.
FeedForwardOptions feed_forward_options(const TransformerLayerOptions& options);
/// The settings of a multi-head attention sublayer of these layers, running `config`.
MultiheadAttentionOptions attention_options(const TransformerLayerOptions& options,
                                            const attention::AttentionConfig& config);
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
  /// Initial values from `gen`; throws Error for bad options (check_options).
  TransformerEncoderLayer(const TransformerLayerOptions& options, Generator& gen);
  /// x (B, N, D), lengths (B) int64 or undefined (no padding) -> (B, N, D); with `trace`, the
  /// layer's input and its self-attention's input are kept there.
  Tensor forward(const Tensor& x, const Tensor& lengths, Generator& gen, EncoderLayerTrace* trace = nullptr);
  /// The self-attention from the next forward on (the weights stay).
  void set_attention(const attention::AttentionConfig& config);
  void set_attention(const std::string& config);  ///< parsed by AttentionConfig::parse
  const TransformerLayerOptions& options() const { return options_; }  ///< its settings

  std::shared_ptr<MultiheadAttention> self_attn;  ///< the self-attention sublayer
  std::shared_ptr<FeedForward> ff;  ///< the feed-forward sublayer
  ///@{
  /// before / after self_attn, ff (see the top of this file)
  std::shared_ptr<LayerNorm> norm1, norm2;
  ///@}
  ///@{
  /// on the self-attention's and the feed-forward block's outputs
  std::shared_ptr<Dropout> dropout1, dropout2;
  ///@}

 private:
  TransformerLayerOptions options_;
};

/// What a decoder layer keeps between the steps of incremental decoding (TransformerDecoderLayer::step).
struct DecoderLayerCache {
  KeyValues self;        ///< the self-attention's keys and values of the positions decoded so far
  KeyValues memory;      ///< the cross-attention's keys and values of the memory, projected once
  Tensor memory_lengths; ///< (B,) int64 or undefined
};

/// Causal self-attention + cross-attention over the memory + feed-forward:
/// x (B, N, D), memory (B, S, D) -> (B, N, D). Output position t depends on x only through
/// positions ≤ t. The self-attention must be full (the clustered types have no causal form); the
/// cross-attention may be any type MultiheadAttention runs.
class TransformerDecoderLayer : public Module {
 public:
  /// Initial values from `gen`; throws Error for bad options or a self-attention with no causal form.
  TransformerDecoderLayer(const TransformerLayerOptions& options, Generator& gen);
  /// x (B, N, D) over memory (B, S, D); lengths and memory_lengths (B) int64 or undefined -> (B, N, D).
  Tensor forward(const Tensor& x, const Tensor& memory, const Tensor& lengths, const Tensor& memory_lengths,
                 Generator& gen);
  /// The self-attention from the next forward on (it must have a causal form).
  void set_self_attention(const attention::AttentionConfig& config);
  /// The cross-attention from the next forward on (the weights stay).
  void set_cross_attention(const attention::AttentionConfig& config);
  void set_self_attention(const std::string& config);  ///< parsed by AttentionConfig::parse
  void set_cross_attention(const std::string& config);  ///< parsed by AttentionConfig::parse
  const TransformerLayerOptions& options() const { return options_; }  ///< its settings

  /// Incremental decoding: the cache before the first step, the memory's keys and values projected.
  DecoderLayerCache start(const Tensor& memory, const Tensor& memory_lengths);
  /// The output at the next position, x (B, 1, D), appending its keys and values to cache.self, so
  /// that step t costs O(t): the same as forward over the whole prefix at its last position.
  Tensor step(const Tensor& x, DecoderLayerCache& cache, Generator& gen);

  ///@{
  /// the causal self-attention and the attention over the memory
  std::shared_ptr<MultiheadAttention> self_attn, cross_attn;
  ///@}
  std::shared_ptr<FeedForward> ff;  ///< the feed-forward sublayer
  ///@{
  /// one per sublayer: self-attention, cross-attention, feed-forward
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;
  ///@}
  ///@{
  /// on the three sublayers' outputs
  std::shared_ptr<Dropout> dropout1, dropout2, dropout3;
  ///@}

 private:
  TransformerLayerOptions options_;
};

/// num_layers encoder layers ("layers.0", ...) and, for pre-norm, a final LayerNorm ("norm").
class TransformerEncoder : public Encoder {
 public:
  /// num_layers ≥ 1 layers initialised from `gen`; throws Error for bad options.
  TransformerEncoder(const TransformerLayerOptions& options, int64_t num_layers, Generator& gen);
  /// x (B, N, D), lengths (B) int64 or undefined (no padding) -> (B, N, D); with `traces`, one
  /// trace per layer is appended there.
  Tensor forward(const Tensor& x, const Tensor& lengths, Generator& gen,
                 std::vector<EncoderLayerTrace>* traces = nullptr);
  /// forward(x, lengths, gen) with no auxiliary loss, and every layer's trace.
  EncoderOutput encode(const Tensor& x, const Tensor& lengths, Generator& gen) override;
  /// Every layer's self-attention, e.g. to evaluate a model trained with full attention with
  /// improved-clustered attention.
  void set_attention(const attention::AttentionConfig& config) override;
  void set_attention(const std::string& config);  ///< parsed by AttentionConfig::parse

  std::shared_ptr<ModuleList<TransformerEncoderLayer>> layers;  ///< the layers, applied in order
  std::shared_ptr<LayerNorm> norm;  ///< null for post-norm
};

/// What a decoder stack keeps between the steps of incremental decoding: one cache per layer.
struct DecoderCache {
  std::vector<DecoderLayerCache> layers;  ///< in layer order
  /// Keeps, in this order, the batch rows `rows` (R,) int64 of every cached tensor: beam search
  /// follows the hypotheses it extends (rows may repeat).
  void select_rows(const Tensor& rows);
};

/// num_layers decoder layers ("layers.0", ...) and, for pre-norm, a final LayerNorm ("norm").
class TransformerDecoder : public Module {
 public:
  /// num_layers ≥ 1 layers initialised from `gen`; throws Error for bad options.
  TransformerDecoder(const TransformerLayerOptions& options, int64_t num_layers, Generator& gen);
  /// x (B, N, D) over memory (B, S, D); lengths and memory_lengths (B) int64 or undefined -> (B, N, D).
  Tensor forward(const Tensor& x, const Tensor& memory, const Tensor& lengths, const Tensor& memory_lengths,
                 Generator& gen);
  /// The self-attention from the next forward on (it must have a causal form).
  void set_self_attention(const attention::AttentionConfig& config);
  /// The cross-attention from the next forward on (the weights stay).
  void set_cross_attention(const attention::AttentionConfig& config);
  void set_self_attention(const std::string& config);  ///< parsed by AttentionConfig::parse
  void set_cross_attention(const std::string& config);  ///< parsed by AttentionConfig::parse

  /// Incremental decoding (e.g. in eval mode, under NoGradGuard):
  ///   DecoderCache cache = decoder.start(memory, memory_lengths);
  ///   for t = 0, 1, ...:  y_t = decoder.step(x_t, cache, gen);   // x_t, y_t (B, 1, D)
  /// y_t equals forward(x_0..t, memory, ...) at position t, at O(t) cost per step.
  DecoderCache start(const Tensor& memory, const Tensor& memory_lengths);
  /// The output (B, 1, D) at the next position x (B, 1, D); see start.
  Tensor step(const Tensor& x, DecoderCache& cache, Generator& gen);

  std::shared_ptr<ModuleList<TransformerDecoderLayer>> layers;  ///< the layers, applied in order
  std::shared_ptr<LayerNorm> norm;  ///< null for post-norm
};

}  // namespace tapestry::nn
