#include "models/translation.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "ops/loss.h"
#include "ops/shape.h"

namespace tapestry::models {

using data::SentencePiece;

namespace {

nn::decode::SearchOptions search_options(const TranslationSearch& search, const std::vector<int64_t>& source_pieces) {
  nn::decode::SearchOptions s;
  s.beam = search.beam;
  s.length_penalty = search.length_penalty;
  s.bos = SentencePiece::kBosId;
  s.eos = SentencePiece::kEosId;
  for (const int64_t n : source_pieces) s.max_lengths.push_back(int64_t(std::ceil(search.max_ratio * double(n))) + 10);
  return s;
}

}  // namespace

std::vector<std::string> translate_sources(Translator& model, const SentencePiece& sp,
                                           const std::vector<std::vector<int64_t>>& sources,
                                           const TranslationSearch& search, Device device, Generator& gen) {
  std::vector<std::string> out(sources.size());
  if (sources.empty()) return out;
  std::vector<int64_t> lengths;
  for (const auto& s : sources) lengths.push_back(int64_t(s.size()));
  data::BatchingOptions b;
  b.max_tokens = std::max<int64_t>(1, search.max_tokens / search.beam);
  b.shuffle = data::Shuffle::No;
  b.oversize = data::Oversize::Alone;
  for (const std::vector<int64_t>& rows : data::bucket_batches(lengths, b)) {
    const data::Batch batch = data::make_batch(sources, rows);
    std::vector<int64_t> pieces;
    for (const int64_t r : rows) pieces.push_back(lengths[size_t(r)] - 1);
    const auto best = translate(model, to(batch.tokens, device), to(batch.lengths, device),
                                search_options(search, pieces), gen, search.incremental);
    for (size_t i = 0; i < rows.size(); ++i) out[size_t(rows[i])] = sp.decode(best[i].tokens);
  }
  return out;
}

TranslatedBatch translation_batch(Translator& model, const data::EncodedPairs& pairs, const std::vector<int64_t>& rows,
                                  Device device, Generator& gen) {
  const data::Batch source = data::make_batch(pairs.source, pairs.target_out, rows);
  const data::Batch target_in = data::make_batch(pairs.target_in, rows);
  TranslatedBatch b;
  for (const int64_t r : rows) b.tokens += int64_t(pairs.target_out[size_t(r)].size());
  b.target_out = to(source.targets, device);
  b.source_lengths = to(source.lengths, device);
  b.target_lengths = to(target_in.lengths, device);
  b.out = model.forward(to(source.tokens, device), b.source_lengths, to(target_in.tokens, device), b.target_lengths,
                        gen);
  return b;
}

Tensor translation_loss(const TranslatedBatch& batch, double label_smoothing) {
  return cross_entropy(batch.out.logits, batch.target_out, SentencePiece::kPadId, label_smoothing);
}

std::vector<std::pair<std::string, double>> evaluate_translation(Translator& model, const SentencePiece& sp,
                                                                 const data::EncodedPairs& eval,
                                                                 const data::BatchList& batches,
                                                                 const TranslationSearch& search, Device device,
                                                                 Generator& gen) {
  double nll = 0;
  int64_t tokens = 0;
  for (const auto& rows : batches) {
    const TranslatedBatch b = translation_batch(model, eval, rows, device, gen);
    nll += translation_loss(b).item<double>() * double(b.tokens);
    tokens += b.tokens;
  }
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::string> hypotheses = translate_sources(model, sp, eval.source, search, device, gen);
  const double decode_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const metrics::BleuScore bleu = metrics::corpus_bleu(hypotheses, eval.references);
  metrics::ChrF chrf;
  for (size_t i = 0; i < hypotheses.size(); ++i) chrf.add(hypotheses[i], eval.references[i]);
  return {{"bleu", bleu.score},
          {"loss", nll / double(std::max<int64_t>(tokens, 1))},
          {"bp", bleu.bp},
          {"chrf", chrf.score()},
          {"decode_sentences_per_second", double(eval.size()) / std::max(decode_seconds, 1e-9)}};
}

std::string translator_not_inspected(const Translator& model) {
  const std::string encoder = nothing_to_inspect(model.options().encoder_attention);
  // A Transformer decoder's layers are not traced (Translator::Output has a ClusterFormer decoder's).
  const std::string decoder = model.clustering_decoder ? nothing_to_inspect(model.options().decoder_attention)
                                                       : "only a ClusterFormer decoder is inspected";
  return encoder.empty() || decoder.empty() ? "" : "encoder: " + encoder + "; decoder: " + decoder;
}

InspectedPass inspected_translation(const Translator& model, const TranslatedBatch& batch, double label_smoothing) {
  InspectedPass pass;
  pass.stacks.push_back(
      {"encoder", model.encoder, model.options().encoder_attention, batch.out.encoder_layers, batch.source_lengths});
  if (model.clustering_decoder)
    pass.stacks.push_back({"decoder", model.clustering_decoder, model.options().decoder_attention,
                           batch.out.decoder_layers, batch.target_lengths});
  pass.task_loss = translation_loss(batch, label_smoothing);
  return pass;
}

}  // namespace tapestry::models
