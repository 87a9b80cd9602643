/// @file
/// Multi-head attention as a layer: q/k/v projections, H heads, an attention chosen by config
/// (nn/attention/config.h: any kind of Form::Heads), and an output projection.
///
/// Shape letters: B batch, N queries, S keys, D model width, H heads, E = D / H head width.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/random.h"
#include "nn/attention/config.h"
#include "nn/layers.h"

namespace tapestry::nn {

/// Settings of MultiheadAttention.
struct MultiheadAttentionOptions {
  int64_t d_model = 512;  ///< D
  int64_t heads = 8;      ///< H, must divide D
  attention::AttentionConfig attention;  ///< full by default
  Bias bias = Bias::Yes;  ///< in all four projections
};

/// Keys and values projected and split into heads, (B, H, S, E) each: what incremental decoding keeps
/// of the positions it has seen (self-attention) or of the memory (cross-attention).
struct KeyValues {
  Tensor keys;    ///< (B, H, S, E)
  Tensor values;  ///< (B, H, S, E)
};

/// out = out_proj(concat_h attend(q_proj(query)_h, k_proj(key)_h, v_proj(value)_h)), i.e.
/// query (B, N, D), key (B, S, D), value (B, S, D) -> (B, N, D). Self-attention passes one tensor
/// three times; cross-attention passes the memory as key and value.
///
/// Padding: padding.query_lengths (B,) and padding.key_lengths (B,) int64, each undefined for none.
/// Padded keys are never attended to, and the padded rows of all three inputs are zeroed before the
/// projections, so no value there (not even NaN or inf) can reach a real position. Outputs at padded
/// queries are finite and meaningless.
/// Causal::Yes: query i sees keys j ≤ i (needs N = S; the kinds whose has_causal_form() says so).
/// State (attention::Kind::initial_state): a layer built with a kind that keeps state (routing's
/// centroids (H, C, E), "routing_centroids") registers it as buffers (initialised from `gen`, saved
/// in checkpoints) and lets the kind move it after every forward in train mode; none in eval mode. A
/// layer built for another attention and switched to such a kind (to evaluate a model with it) gets
/// state that is not saved, from a fixed seed, updated the same way in train mode.
/// Shared-QK configs (full:shared-qk=1): the keys are q_proj of the key input, normalised in attend;
/// k_proj stays a parameter (unused while shared), so checkpoints fit either kind.
/// gen: the clustered kinds draw their hash planes from it on every call (in both modes); full
/// attention draws nothing.
///
/// Kinds of attention::Form::HiddenStates (neural-clustering) are not a MultiheadAttention: they
/// cluster the hidden states before projecting them and return losses and centroids besides their
/// output, so the ClusterFormer layers run them. Asking for one here throws.
class MultiheadAttention : public Module {
 public:
  /// The four projections, initialised from `gen` (as nn::Linear); throws Error for bad options.
  MultiheadAttention(const MultiheadAttentionOptions& options, Generator& gen);
  /// query (B, N, D), key and value (B, S, D) -> (B, N, D), with the configured attention.
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value, const attention::Padding& padding,
                 attention::Causal causal, Generator& gen);

  /// q_proj(query) split into heads (B, H, N, E), the rows at positions ≥ query_lengths[b] zeroed
  /// first (query_lengths undefined: none): the queries forward() attends with, for inspection.
  Tensor project_queries(const Tensor& query, const Tensor& query_lengths);
  /// k_proj(key) and v_proj(value) split into heads, for forward_cached; key and value (B, S, D),
  /// their rows at positions ≥ key_lengths[b] zeroed first (key_lengths undefined: none).
  KeyValues project_keys_values(const Tensor& key, const Tensor& value, const Tensor& key_lengths);
  /// query (B, N, D) attending over keys and values projected before, with the configured attention
  /// and no causal mask: what a decoder runs step by step, where the keys are exactly the positions
  /// seen so far. forward(q, k, v, padding, Causal::No, gen) equals
  /// forward_cached(q, project_keys_values(k, v, padding.key_lengths), padding.key_lengths, gen) at
  /// the real queries.
  Tensor forward_cached(const Tensor& query, const KeyValues& cached, const Tensor& key_lengths, Generator& gen);

  /// The attention used from the next forward on; the projections are kept, so a model trained with
  /// one attention can be evaluated with another. Throws for a kind of Form::HiddenStates, and for a
  /// kind whose state does not fit the state this layer was built with.
  void set_attention(const attention::AttentionConfig& config);
  void set_attention(const std::string& config);  ///< parsed by AttentionConfig::parse
  /// The attention it runs now.
  const attention::AttentionConfig& attention() const { return options_.attention; }
  const MultiheadAttentionOptions& options() const { return options_; }  ///< its settings

  /// Throws Error naming `layer` when `config` is not an attention MultiheadAttention runs, or, with
  /// Causal::Yes, one that has no causal form.
  static void check_attention(const std::string& layer, const attention::AttentionConfig& config,
                              attention::Causal causal);
  /// AttentionConfig::parse(text), with `layer` named in front of its errors.
  static attention::AttentionConfig parse_attention(const std::string& layer, const std::string& text);

  ///@{
  /// The query, key, value and output projections, each D -> D.
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, out_proj;
  ///@}

  /// The state its attention keeps now, by name (routing: "routing_centroids" (H, C, E)); empty for
  /// the kinds that keep none.
  const attention::State& attention_state() const { return state_; }

 private:
  Tensor split_heads(const Tensor& x) const;   // (B, L, D) -> (B, H, L, E)
  Tensor merge_heads(const Tensor& x) const;   // (B, H, L, E) -> out_proj of (B, L, D)
  void check_model_input(const char* what, const Tensor& x) const;

  MultiheadAttentionOptions options_;
  attention::State state_;  // the attention's state; registered buffers when built for its kind
};

}  // namespace tapestry::nn
