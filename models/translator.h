/// @file
/// An encoder-decoder Transformer for translation (Vaswani et al., 2017), as the ClusterFormer paper
/// trains it on IWSLT14 De→En (§4.1): one embedding table shared by the source and the target (a
/// joint subword vocabulary), optionally tied with the output projection; sinusoidal positions; an
/// encoder chosen by its attention config (nn/encoder.h: neural-clustering gives the ClusterFormer,
/// whose clustering losses µ·L1 + ν·L2 are the auxiliary loss); a decoder with causal full
/// self-attention, or the ClusterFormer decoder with masked neural clustering self-attention
/// (appendix B; its losses join the auxiliary loss), and full cross-attention. `tapestry translate`
/// trains it.
///
/// Embeddings are scaled as in fairseq's Transformer: the table starts N(0, 1/D) and is multiplied by
/// √D on input, so the input has unit-variance entries while the tied output projection h·Eᵀ starts
/// with small logits.
///
/// Shape letters: B sentences, S source positions, T target positions, D = heads · head_dim, V vocabulary.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nn/clusterformer.h"
#include "nn/decode/search.h"
#include "nn/encoder.h"
#include "nn/layers.h"
#include "nn/transformer.h"

namespace tapestry::models {

/// The sizes and settings of a Translator.
struct TranslatorOptions {
  int64_t vocabulary = 0;  ///< V, the joint vocabulary; id 0 is padding
  int64_t encoder_layers = 3;  ///< layers of the encoder
  int64_t decoder_layers = 3;  ///< layers of the decoder
  int64_t heads = 4;       ///< H
  int64_t head_dim = 64;   ///< E; D = H·E
  int64_t ff = 1024;       ///< feed-forward width
  double dropout = 0.1;    ///< the encoder and decoder layers' dropout (nn::TransformerLayerOptions::dropout)
  bool tie_output = true;  ///< the output projection is the embedding table (no weights of its own)
  attention::AttentionConfig encoder_attention;  ///< the encoder's self-attention
  attention::AttentionConfig decoder_attention;  ///< the decoder's causal self-attention: any kind with a causal form
  nn::ClusteringLossWeights clustering;          ///< µ, ν for a neural-clustering encoder or decoder (eq. 17)
};

/// The encoder-decoder Transformer of this file: source (B, S) and target (B, T) → logits (B, T, V).
class Translator : public nn::Module {
 public:
  /// Parameters, drawn from gen in this order: "embedding" (V, D), "encoder.*", "decoder.*" (a
  /// TransformerDecoder, or a ClusterFormerDecoder for a neural-clustering decoder), and "output"
  /// (V, D, with bias) unless tie_output. Throws Error for bad options, and for a decoder
  /// self-attention other than full or neural-clustering (the clustered types have no causal form).
  Translator(const TranslatorOptions& options, Generator& gen);

  /// What forward returns.
  struct Output {
    Tensor logits;    ///< (B, T, V)
    Tensor aux_loss;  ///< the neural-clustering encoder's and decoder's µ·L1 + ν·L2, else undefined
    std::vector<nn::EncoderLayerTrace> encoder_layers;  ///< each encoder layer's tensors (nn/encoder.h), for inspection
    std::vector<nn::EncoderLayerTrace> decoder_layers;  ///< a neural-clustering decoder's, else empty
    /// task_loss + the auxiliary loss: what training minimises.
    Tensor objective(const Tensor& task_loss) const { return nn::EncoderOutput{logits, aux_loss, {}}.objective(task_loss); }
  };
  /// Teacher forcing: source (B, S) and target_in (B, T) int64 tokens in [0, V) (target_in begins
  /// with bos), their lengths (B) int64 (undefined: no padding). Position t of the logits predicts
  /// target token t + 1 from source and target_in[.., ≤ t].
  Output forward(const Tensor& source, const Tensor& source_lengths, const Tensor& target_in,
                 const Tensor& target_lengths, Generator& gen);

  /// The encoder's output over source (B, S): memory (B, S, D) and its auxiliary loss.
  nn::EncoderOutput encode(const Tensor& source, const Tensor& source_lengths, Generator& gen);
  /// Embedded tokens (B, N) → (B, N, D), positions first .. first + N − 1.
  Tensor embed(const Tensor& tokens, int64_t first_position);
  /// Decoder states (..., D) → logits (..., V).
  Tensor project(const Tensor& hidden);
  /// The decoder over embedded targets x (B, T, D) and memory (B, S, D): its states (B, T, D) and, for
  /// a neural-clustering decoder, its µ·L1 + ν·L2 (else undefined).
  nn::EncoderOutput decode(const Tensor& x, const Tensor& memory, const Tensor& lengths, const Tensor& memory_lengths,
                           Generator& gen);
  /// Whether the decoder keeps keys and values for incremental decoding: a Transformer decoder whose
  /// self-attention kind decodes incrementally (attention::Kind::decodes_incrementally: full). A neural-clustering decoder (nn/clusterformer.h) and the other kinds re-run the prefix.
  bool has_decoder_cache() const {
    return decoder != nullptr && options_.decoder_attention.kind().decodes_incrementally();
  }

  /// The encoder's self-attention (nn::Encoder::set_attention), e.g. to evaluate with another.
  void set_encoder_attention(const attention::AttentionConfig& config) { encoder->set_attention(config); }
  const TranslatorOptions& options() const { return options_; }  ///< its settings

  std::shared_ptr<nn::Embedding> embedding;  ///< (V, D), shared by source and target (and the output when tied)
  std::shared_ptr<nn::SinusoidalPositionalEncoding> positions;  ///< added to the scaled embeddings
  std::shared_ptr<nn::Encoder> encoder;  ///< the encoder layers (nn::make_encoder)
  std::shared_ptr<nn::TransformerDecoder> decoder;               ///< full self-attention, else null
  std::shared_ptr<nn::ClusterFormerDecoder> clustering_decoder;  ///< neural-clustering, else null
  std::shared_ptr<nn::Linear> output;  ///< null when tie_output

 private:
  void check_tokens(const char* what, const Tensor& tokens) const;
  TranslatorOptions options_;
};

/// Whether decoding keeps each layer's keys and values (O(t) per step) or re-runs the decoder over
/// the whole prefix at every step (O(t²); the reference the cache is tested against). A model
/// without a decoder cache (has_decoder_cache) always re-runs the prefix.
enum class Incremental { Yes, No };

/// A batch being decoded by a Translator: the two functions nn/decode/search.h's searches call.
/// Run it in eval mode under NoGradGuard.
///
///   TranslatorDecoding d(model, source, source_lengths, Incremental::Yes, gen);
///   auto best = nn::decode::greedy_search(B, d.next_function(), d.select_function(), search_options);
class TranslatorDecoding {
 public:
  /// Encodes source (B, S) once.
  TranslatorDecoding(Translator& model, const Tensor& source, const Tensor& source_lengths, Incremental incremental,
                     Generator& gen);
  /// Feeds last (R,) int64 (on any device) and returns the next token's log-probabilities (R, V).
  Tensor next(const Tensor& last);
  /// Keeps rows `rows` (R',) int64 of the state, in that order.
  void select_rows(const Tensor& rows);

  /// next, as the searches take it (it refers to this object, which must outlive it).
  nn::decode::NextLogProbs next_function() {
    return [this](const Tensor& last) { return next(last); };
  }
  /// select_rows, as the searches take it (it refers to this object, which must outlive it).
  nn::decode::SelectRows select_function() {
    return [this](const Tensor& rows) { select_rows(rows); };
  }

 private:
  Translator& model_;
  Incremental incremental_;
  Generator& gen_;
  ///@{
  /// (R, S, D), (R,) or undefined
  Tensor memory_, memory_lengths_;
  ///@}
  nn::DecoderCache cache_;          ///< Incremental::Yes
  Tensor prefix_;                   ///< (R, t) int64 tokens fed so far, Incremental::No
  int64_t position_ = 0;            ///< tokens fed so far
};

/// The best translation of each sentence of source (B, S): greedy search for options.beam == 1, else
/// beam search's best. Runs in eval mode under NoGradGuard (the mode is restored).
std::vector<nn::decode::Hypothesis> translate(Translator& model, const Tensor& source, const Tensor& source_lengths,
                                              const nn::decode::SearchOptions& options, Generator& gen,
                                              Incremental incremental = Incremental::Yes);

}  // namespace tapestry::models
