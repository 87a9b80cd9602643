/// @file
/// A Translator (models/translator.h) on an encoded translation corpus (data/translation_corpus.h):
/// teacher-forced batches of its pairs, translations of its sources by greedy or beam search, the
/// scores an evaluation reports, and what the inspector sees of it.
///
///   const TranslationSearch search{beam, lenpen, max_ratio, Incremental::Yes, max_tokens};
///   translate_sources(model, *corpus.sp, corpus.eval.source, search, device, gen);  // detokenised
///   evaluate_translation(model, *corpus.sp, corpus.eval, batches, search, device, gen);
///   // {bleu, loss, bp, chrf, decode_sentences_per_second}
///
/// Shape letters: B sentences, S source positions, T target positions, V vocabulary.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/batch.h"
#include "data/parallel_text.h"
#include "data/sentencepiece.h"
#include "models/inspection.h"
#include "models/translator.h"

namespace tapestry::models {

/// How sentences are translated.
struct TranslationSearch {
  int64_t beam = 1;            ///< 1: greedy search; else beam search keeping `beam` hypotheses
  double length_penalty = 1;   ///< beam search's scores are log p / length^length_penalty
  double max_ratio = 1.5;      ///< a translation has at most ceil(max_ratio × source pieces) + 10 pieces
  Incremental incremental = Incremental::Yes;  ///< decode with the key/value cache, or re-run the prefix
  int64_t max_tokens = 4096;   ///< source tokens per batch are about max_tokens / beam
};

/// The translations of `sources` (encoded, eos last) detokenised by `sp`, in order, translated by
/// batches of about search.max_tokens / search.beam source tokens (a longer source alone).
std::vector<std::string> translate_sources(Translator& model, const data::SentencePiece& sp,
                                           const std::vector<std::vector<int64_t>>& sources,
                                           const TranslationSearch& search, Device device, Generator& gen);

/// Pairs of an encoded corpus through a Translator under teacher forcing.
struct TranslatedBatch {
  Translator::Output out;  ///< the model's output; out.logits (B, T, V)
  Tensor target_out;       ///< (B, T) int64: what each position predicts, padding data::SentencePiece::kPadId
  Tensor source_lengths;   ///< (B) int64
  Tensor target_lengths;   ///< (B) int64
  int64_t tokens = 0;      ///< the target tokens (eos included)
};

/// The pairs `rows` of `pairs` as one padded batch (data::make_batch) on `device`, through `model`.
TranslatedBatch translation_batch(Translator& model, const data::EncodedPairs& pairs, const std::vector<int64_t>& rows,
                                  Device device, Generator& gen);

/// The label-smoothed cross-entropy of a batch (padding ignored): its task loss.
Tensor translation_loss(const TranslatedBatch& batch, double label_smoothing = 0);

/// Scores `model` on `eval` (every pair; `batches` its rows for teacher forcing, translated as
/// translate_sources batches them): {bleu (corpus BLEU of the translations against eval.references,
/// metrics/bleu.h), loss (the target tokens' mean negative log-likelihood, no smoothing), bp (BLEU's
/// brevity penalty), chrf (corpus chrF2, metrics/chrf.h), decode_sentences_per_second}.
std::vector<std::pair<std::string, double>> evaluate_translation(Translator& model, const data::SentencePiece& sp,
                                                                 const data::EncodedPairs& eval,
                                                                 const data::BatchList& batches,
                                                                 const TranslationSearch& search, Device device,
                                                                 Generator& gen);

/// Why nothing of `model` can be inspected (models::nothing_to_inspect of its encoder and of its
/// decoder, of which only a ClusterFormer decoder is traced), or empty when something can.
std::string translator_not_inspected(const Translator& model);

/// What the inspector reads of a batch: the encoder and a neural-clustering decoder, with the
/// attentions the model was built with, and the batch's translation_loss.
InspectedPass inspected_translation(const Translator& model, const TranslatedBatch& batch, double label_smoothing);

}  // namespace tapestry::models
