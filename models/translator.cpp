#include "models/translator.h"

#include "core/tape_graph.h"

#include <cmath>
#include <string>

#include "core/autograd.h"
#include "core/error.h"
#include "models/layer_options.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/matmul.h"
#include "ops/shape.h"
#include "ops/softmax.h"

namespace tapestry::models {

Translator::Translator(const TranslatorOptions& o, Generator& gen) : Module("Translator"), options_(o) {
  TP_CHECK(o.vocabulary >= 5, name(), "the vocabulary needs the 4 special ids and at least one piece, got ",
           o.vocabulary);
  TP_CHECK(o.encoder_layers >= 1 && o.decoder_layers >= 1, name(), "needs at least one encoder and one decoder layer, got ",
           o.encoder_layers, " and ", o.decoder_layers);
  TP_CHECK(o.decoder_attention.kind().has_causal_form(), name(), "the decoder's self-attention must have a causal ",
           "form (", attention::kind_names([](const attention::Kind& k) { return k.has_causal_form(); }), "), got '",
           o.decoder_attention.to_string(), "'");
  nn::TransformerLayerOptions layer = layer_options(name().c_str(), o.heads, o.head_dim, o.ff, o.dropout,
                                                    o.encoder_attention);
  const int64_t D = layer.d_model;
  embedding = register_module("embedding", std::make_shared<nn::Embedding>(o.vocabulary, D, gen, /*padding_idx=*/0));
  {
    NoGradGuard no_grad;
    mul_(embedding->weight, 1.0 / std::sqrt(double(D)));  // N(0, 1/D): see the top of translator.h
  }
  positions = register_module("positions", std::make_shared<nn::SinusoidalPositionalEncoding>(D));
  encoder = register_module("encoder", nn::make_encoder(layer, o.encoder_layers, gen, o.clustering));
  layer.attention = o.decoder_attention;
  if (o.decoder_attention.kind().form() == attention::Form::HiddenStates)
    clustering_decoder =
        register_module("decoder", std::make_shared<nn::ClusterFormerDecoder>(layer, o.decoder_layers, gen));
  else
    decoder = register_module("decoder", std::make_shared<nn::TransformerDecoder>(layer, o.decoder_layers, gen));
  if (!o.tie_output) output = register_module("output", std::make_shared<nn::Linear>(D, o.vocabulary, gen));
}

void Translator::check_tokens(const char* what, const Tensor& tokens) const {
  TP_CHECK(tokens.defined() && tokens.dim() == 2 && tokens.dtype() == DType::Int64, name(), "expected ", what,
           " tokens (B, N) int64, got ",
           tokens.defined() ? to_string(tokens.shape()) + " " + dtype_name(tokens.dtype()) : std::string("an undefined tensor"));
}

Tensor Translator::embed(const Tensor& tokens, int64_t first_position) {
  check_tokens("input", tokens);
  const int64_t D = embedding->embedding_dim(), N = tokens.size(1);
  const Tensor x = embedding->forward(tokens) * std::sqrt(double(D));  // (B, N, D)
  if (first_position == 0) return positions->forward(x);
  const Tensor table = nn::SinusoidalPositionalEncoding::table(first_position + N, D, {x.dtype(), x.device()});
  return x + slice(table, 0, first_position, first_position + N);
}

Tensor Translator::project(const Tensor& hidden) {
  return output ? output->forward(hidden) : matmul(hidden, transpose(embedding->weight, 0, 1));
}

nn::EncoderOutput Translator::encode(const Tensor& source, const Tensor& source_lengths, Generator& gen) {
  check_tokens("source", source);
  const Tensor x = embed(source, 0);
  const TapeScope scope("encoder");
  return encoder->encode(x, source_lengths, gen);
}

Translator::Output Translator::forward(const Tensor& source, const Tensor& source_lengths, const Tensor& target_in,
                                       const Tensor& target_lengths, Generator& gen) {
  check_tokens("target", target_in);
  TP_CHECK(source.defined() && target_in.size(0) == source.size(0), name(), "source ",
           source.defined() ? to_string(source.shape()) : std::string("(undefined)"), " and target ",
           to_string(target_in.shape()), " hold different numbers of sentences");
  const nn::EncoderOutput memory = encode(source, source_lengths, gen);
  const nn::EncoderOutput hidden = decode(embed(target_in, 0), memory.output, target_lengths, source_lengths, gen);
  const Tensor& a = memory.aux_loss;
  const Tensor& b = hidden.aux_loss;
  return {project(hidden.output), a.defined() && b.defined() ? a + b : a.defined() ? a : b, memory.layers,
          hidden.layers};
}

nn::EncoderOutput Translator::decode(const Tensor& x, const Tensor& memory, const Tensor& lengths,
                                     const Tensor& memory_lengths, Generator& gen) {
  const TapeScope scope("decoder");
  if (decoder) return {decoder->forward(x, memory, lengths, memory_lengths, gen), Tensor(), {}};
  const nn::ClusterFormerOutput out = clustering_decoder->forward(x, memory, lengths, memory_lengths, gen);
  // eq. 17 without the task term, as the encoder's
  const nn::ClusteringLossWeights& w = options_.clustering;
  return {out.output, out.clustering_loss * w.mu + out.sorting_loss * w.nu, out.layers};
}

// ---- decoding ----

TranslatorDecoding::TranslatorDecoding(Translator& model, const Tensor& source, const Tensor& source_lengths,
                                       Incremental incremental, Generator& gen)
    : model_(model),
      incremental_(model.has_decoder_cache() ? incremental : Incremental::No),
      gen_(gen),
      memory_lengths_(source_lengths) {
  memory_ = model.encode(source, source_lengths, gen).output;
  if (incremental_ == Incremental::Yes) cache_ = model.decoder->start(memory_, memory_lengths_);
}

Tensor TranslatorDecoding::next(const Tensor& last) {
  const Tensor tokens = reshape(to(last, memory_.device()), {last.numel(), 1});  // (R, 1)
  Tensor hidden;  // (R, 1, D)
  if (incremental_ == Incremental::Yes) {
    hidden = model_.decoder->step(model_.embed(tokens, position_), cache_, gen_);
  } else {
    prefix_ = prefix_.defined() ? concat({prefix_, tokens}, 1) : tokens;
    const Tensor all = model_.decode(model_.embed(prefix_, 0), memory_, Tensor(), memory_lengths_, gen_).output;
    hidden = slice(all, 1, position_, position_ + 1);
  }
  ++position_;
  return log_softmax(reshape(model_.project(hidden), {last.numel(), -1}));
}

void TranslatorDecoding::select_rows(const Tensor& rows) {
  const Tensor index = to(rows, memory_.device());
  if (incremental_ == Incremental::Yes) {
    cache_.select_rows(index);
  } else {
    memory_ = index_select(memory_, 0, index);
    if (memory_lengths_.defined()) memory_lengths_ = index_select(memory_lengths_, 0, index);
    if (prefix_.defined()) prefix_ = index_select(prefix_, 0, index);
  }
}

std::vector<nn::decode::Hypothesis> translate(Translator& model, const Tensor& source, const Tensor& source_lengths,
                                              const nn::decode::SearchOptions& options, Generator& gen,
                                              Incremental incremental) {
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  TranslatorDecoding decoding(model, source, source_lengths, incremental, gen);
  const int64_t B = source.size(0);
  std::vector<nn::decode::Hypothesis> best;
  if (options.beam == 1) {
    best = nn::decode::greedy_search(B, decoding.next_function(), decoding.select_function(), options);
  } else {
    for (auto& hypotheses : nn::decode::beam_search(B, decoding.next_function(), decoding.select_function(), options))
      best.push_back(std::move(hypotheses.front()));
  }
  if (was_training) model.train();
  return best;
}

}  // namespace tapestry::models
