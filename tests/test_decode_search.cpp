// Autoregressive decoding: the decoder's key/value cache against re-running it on the prefix,
// greedy and beam search (on a hand-built model whose best sentence greedy misses, and on a real
// Translator: beam 1 is greedy, the cache changes no score), length limits, and bad input.
#include <cmath>
#include <map>

#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;
using nn::decode::Hypothesis;
using nn::decode::SearchOptions;

namespace {

Tensor lengths(std::vector<int64_t> values) {
  const int64_t n = static_cast<int64_t>(values.size());
  return from_vector<int64_t>(values, {n});
}

nn::TransformerLayerOptions small_options(nn::NormPosition norm) {
  nn::TransformerLayerOptions o;
  o.d_model = 8;
  o.heads = 2;
  o.d_ff = 12;
  o.dropout = 0.0;
  o.norm = norm;
  return o;
}

// A language model over tokens {0: pad, 1: a, 2: bos, 3: eos, 4: b} given by a table of
// next-token probabilities per prefix, for searches whose answers can be worked out by hand:
//   after bos:     a 0.6, b 0.4
//   after bos a:   eos 0.4, a 0.3, b 0.3
//   after bos b:   eos 0.9, a 0.05, b 0.05
//   longer:        eos 1 (in effect)
// Greedy takes a (0.6) then eos (0.4): p = 0.24. Beam 2 also finds b eos: p = 0.36.
class TableModel {
 public:
  Tensor next(const Tensor& last) {
    const std::vector<int64_t> tokens = last.to_vector<int64_t>();
    REQUIRE(tokens.size() == prefixes_.size());
    std::vector<double> lp;
    for (size_t r = 0; r < tokens.size(); ++r) {
      prefixes_[r].push_back(tokens[r]);
      std::vector<double> p(5, 1e-9);
      if (prefixes_[r] == std::vector<int64_t>{2}) p[1] = 0.6, p[4] = 0.4;
      else if (prefixes_[r] == std::vector<int64_t>{2, 1}) p[3] = 0.4, p[1] = 0.3, p[4] = 0.3;
      else if (prefixes_[r] == std::vector<int64_t>{2, 4}) p[3] = 0.9, p[1] = 0.05, p[4] = 0.05;
      else p[3] = 1.0;
      for (const double x : p) lp.push_back(std::log(x));
    }
    ++calls;
    return from_vector(lp, {int64_t(tokens.size()), 5});
  }
  void select_rows(const Tensor& rows) {
    std::vector<std::vector<int64_t>> kept;
    for (const int64_t r : rows.to_vector<int64_t>()) kept.push_back(prefixes_.at(size_t(r)));
    prefixes_ = kept;
  }
  void reset(size_t rows) { prefixes_.assign(rows, {}); }
  nn::decode::NextLogProbs next_function() {
    return [this](const Tensor& last) { return next(last); };
  }
  nn::decode::SelectRows select_function() {
    return [this](const Tensor& rows) { select_rows(rows); };
  }
  int calls = 0;

 private:
  std::vector<std::vector<int64_t>> prefixes_;
};

SearchOptions options(int64_t beam, int64_t batch, int64_t max_length, double length_penalty = 0.0) {
  SearchOptions o;
  o.beam = beam;
  o.length_penalty = length_penalty;
  o.max_lengths.assign(size_t(batch), max_length);
  return o;
}

models::TranslatorOptions tiny_translator() {
  models::TranslatorOptions o;
  o.vocabulary = 13;
  o.encoder_layers = 2;
  o.decoder_layers = 2;
  o.heads = 2;
  o.head_dim = 4;
  o.ff = 16;
  o.dropout = 0.0;
  return o;
}

}  // namespace

TEST_CASE("MultiheadAttention: attending over projected keys and values equals forward") {
  Generator gen(3);
  nn::MultiheadAttentionOptions mo;
  mo.d_model = 8;
  mo.heads = 2;
  nn::MultiheadAttention attn(mo, gen);
  attn.to(DType::Float64);
  const Tensor q = uniform({2, 3, 8}, 4), kv = uniform({2, 5, 8}, 5);
  const Tensor key_lengths = lengths({5, 2});
  Generator g(0);
  const Tensor expected = attn.forward(q, kv, kv, {Tensor(), key_lengths}, attention::Causal::No, g);
  const nn::KeyValues cached = attn.project_keys_values(kv, kv, key_lengths);
  CHECK(cached.keys.shape() == Shape{2, 2, 5, 4});
  check_close(attn.forward_cached(q, cached, key_lengths, g), expected, 1e-12, 1e-12);
  check_error([&] { attn.forward_cached(q, {cached.keys, Tensor()}, key_lengths, g); },
              {"MultiheadAttention.forward_cached", "undefined"});
  check_error([&] { attn.forward_cached(uniform({3, 3, 8}, 6), cached, key_lengths, g); },
              {"MultiheadAttention.forward_cached", "(3, 2, S, 4)"});
}

TEST_CASE("TransformerDecoder: each incremental step equals the full decoder at that position") {
  for (const nn::NormPosition norm : {nn::NormPosition::Post, nn::NormPosition::Pre}) {
    INFO((norm == nn::NormPosition::Pre ? "pre-norm" : "post-norm"));
    Generator gen(7);
    nn::TransformerDecoder decoder(small_options(norm), 2, gen);
    decoder.to(DType::Float64);
    decoder.eval();
    NoGradGuard no_grad;
    const Tensor x = uniform({3, 6, 8}, 8), memory = uniform({3, 4, 8}, 9);
    const Tensor memory_lengths = lengths({4, 1, 3});
    Generator g(0);
    const Tensor full = decoder.forward(x, memory, Tensor(), memory_lengths, g);
    nn::DecoderCache cache = decoder.start(memory, memory_lengths);
    for (int64_t t = 0; t < 6; ++t) {
      INFO("step " << t);
      check_close(decoder.step(slice(x, 1, t, t + 1), cache, g), slice(full, 1, t, t + 1), 1e-12, 1e-12);
    }
    // Rows selected from the cache continue as those rows would: row 2 twice, then row 0.
    const Tensor rows = from_vector<int64_t>({2, 2, 0}, {3});
    cache.select_rows(rows);
    const Tensor x7 = uniform({3, 1, 8}, 10);
    const Tensor x_selected = concat({index_select(x, 0, rows), x7}, 1);
    const Tensor expected = decoder.forward(x_selected, index_select(memory, 0, rows), Tensor(),
                                            index_select(memory_lengths, 0, rows), g);
    check_close(decoder.step(x7, cache, g), slice(expected, 1, 6, 7), 1e-12, 1e-12);
  }
}

TEST_CASE("TransformerDecoder::step: bad input") {
  Generator gen(1);
  nn::TransformerDecoder decoder(small_options(nn::NormPosition::Post), 1, gen);
  nn::DecoderCache empty;
  check_error([&] { decoder.step(zeros({2, 1, 8}), empty, gen); }, {"TransformerDecoder", "cache holds 0 layers"});
  nn::DecoderCache cache = decoder.start(zeros({2, 3, 8}), Tensor());
  check_error([&] { decoder.step(zeros({2, 2, 8}), cache, gen); }, {"TransformerDecoderLayer", "one position", "(2, 2, 8)"});
  check_error([&] { decoder.step(zeros({3, 1, 8}), cache, gen); }, {"TransformerDecoderLayer", "cache of 2 rows"});
  check_error([&] { decoder.start(zeros({2, 3, 5}), Tensor()); }, {"TransformerDecoderLayer", "memory", "(2, 3, 5)"});
  decoder.set_self_attention("oracle-top:topk=2");
  check_error([&] { decoder.step(zeros({2, 1, 8}), cache, gen); },
              {"TransformerDecoderLayer", "incremental decoding needs", "(full)", "oracle-top"});
}

TEST_CASE("greedy and beam search on a table whose best sentence greedy misses") {
  TableModel model;
  model.reset(2);  // two identical sentences, to check batching
  const std::vector<Hypothesis> greedy =
      nn::decode::greedy_search(2, model.next_function(), model.select_function(), options(1, 2, 10));
  for (const Hypothesis& h : greedy) {
    CHECK(h.tokens == std::vector<int64_t>{1});
    CHECK(h.ended);
    CHECK(h.log_prob == doctest::Approx(std::log(0.24)).epsilon(1e-6));
    CHECK(h.score == doctest::Approx(std::log(0.24)).epsilon(1e-6));  // length penalty 0
  }
  model.reset(2);
  const auto beams = nn::decode::beam_search(2, model.next_function(), model.select_function(), options(2, 2, 10));
  for (const std::vector<Hypothesis>& hs : beams) {
    REQUIRE(hs.size() == 2);
    CHECK(hs[0].tokens == std::vector<int64_t>{4});
    CHECK(hs[0].log_prob == doctest::Approx(std::log(0.36)).epsilon(1e-6));
    CHECK(hs[1].tokens == std::vector<int64_t>{1});
    CHECK(hs[1].log_prob == doctest::Approx(std::log(0.24)).epsilon(1e-6));
  }
  // Length penalty 1: score = log p / T with T counting eos (2 tokens here).
  model.reset(1);
  const auto normalised = nn::decode::beam_search(1, model.next_function(), model.select_function(), options(2, 1, 10, 1.0));
  CHECK(normalised[0][0].score == doctest::Approx(std::log(0.36) / 2).epsilon(1e-6));
  // Beam 1 is greedy.
  model.reset(1);
  const auto one = nn::decode::beam_search(1, model.next_function(), model.select_function(), options(1, 1, 10));
  REQUIRE(one[0].size() == 1);
  CHECK(one[0][0].tokens == greedy[0].tokens);
  CHECK(one[0][0].log_prob == doctest::Approx(greedy[0].log_prob).epsilon(1e-12));
}

TEST_CASE("searches stop at the maximum length, without eos") {
  TableModel model;
  model.reset(1);
  const std::vector<Hypothesis> greedy =
      nn::decode::greedy_search(1, model.next_function(), model.select_function(), options(1, 1, 1));
  CHECK(greedy[0].tokens == std::vector<int64_t>{1});
  CHECK_FALSE(greedy[0].ended);
  CHECK(greedy[0].log_prob == doctest::Approx(std::log(0.6)).epsilon(1e-6));
  CHECK(model.calls == 1);
  model.reset(1);
  const auto beams = nn::decode::beam_search(1, model.next_function(), model.select_function(), options(2, 1, 1));
  REQUIRE(beams[0].size() == 2);  // a and b; eos ranks below both at step 0
  CHECK(beams[0][0].tokens == std::vector<int64_t>{1});
  CHECK(beams[0][1].tokens == std::vector<int64_t>{4});
  CHECK_FALSE(beams[0][0].ended);
}

TEST_CASE("searches: bad input") {
  TableModel model;
  model.reset(1);
  check_error([&] { nn::decode::beam_search(1, model.next_function(), model.select_function(), options(0, 1, 5)); },
              {"beam_search", "beam must be at least 1, got 0"});
  check_error([&] { nn::decode::greedy_search(2, model.next_function(), model.select_function(), options(1, 1, 5)); },
              {"greedy_search", "2 sentences, 1 lengths"});
  check_error([&] { nn::decode::greedy_search(1, model.next_function(), model.select_function(), options(1, 1, 0)); },
              {"greedy_search", "at least 1, got 0"});
  check_error([&] { nn::decode::greedy_search(0, model.next_function(), model.select_function(), options(1, 0, 5)); },
              {"greedy_search", "at least one sentence"});
  const auto wrong = [](const Tensor&) { return zeros({3, 5}); };
  check_error([&] { nn::decode::greedy_search(1, wrong, model.select_function(), options(1, 1, 5)); },
              {"greedy_search", "(1, V) floating", "(3, 5)"});
  const auto nan = [](const Tensor& last) { return full({last.numel(), 5}, NAN); };
  check_error([&] { nn::decode::beam_search(1, nan, model.select_function(), options(2, 1, 5)); },
              {"beam_search", "NaN"});
}

TEST_CASE("Translator decoding: the cache changes no score, and beam 1 is greedy") {
  Generator gen(11);
  models::Translator model(tiny_translator(), gen);
  model.eval();
  NoGradGuard no_grad;
  const Tensor source = from_vector<int64_t>({5, 6, 7, 8, 3, 9, 10, 3, 0, 0}, {2, 5});
  const Tensor source_lengths = lengths({5, 3});
  for (const int64_t beam : {1, 3}) {
    INFO("beam " << beam);
    std::map<int, std::vector<Hypothesis>> found;
    for (const models::Incremental incremental : {models::Incremental::Yes, models::Incremental::No}) {
      Generator g(0);
      models::TranslatorDecoding d(model, source, source_lengths, incremental, g);
      const SearchOptions o = options(beam, 2, 7, 1.0);
      found[int(incremental)] = beam == 1 ? nn::decode::greedy_search(2, d.next_function(), d.select_function(), o)
                                          : [&] {
                                              std::vector<Hypothesis> best;
                                              for (auto& hs : nn::decode::beam_search(2, d.next_function(),
                                                                                      d.select_function(), o))
                                                best.push_back(hs.front());
                                              return best;
                                            }();
    }
    const auto& cached = found[int(models::Incremental::Yes)];
    const auto& rerun = found[int(models::Incremental::No)];
    for (size_t s = 0; s < 2; ++s) {
      CHECK(cached[s].tokens == rerun[s].tokens);
      CHECK(cached[s].log_prob == doctest::Approx(rerun[s].log_prob).epsilon(1e-5));
    }
  }
  // beam_search with beam 1 returns what greedy_search returns, on the real model.
  Generator g1(0), g2(0);
  models::TranslatorDecoding a(model, source, source_lengths, models::Incremental::Yes, g1);
  models::TranslatorDecoding b(model, source, source_lengths, models::Incremental::Yes, g2);
  const auto greedy = nn::decode::greedy_search(2, a.next_function(), a.select_function(), options(1, 2, 7, 1.0));
  const auto beam1 = nn::decode::beam_search(2, b.next_function(), b.select_function(), options(1, 2, 7, 1.0));
  for (size_t s = 0; s < 2; ++s) {
    CHECK(beam1[s].front().tokens == greedy[s].tokens);
    CHECK(beam1[s].front().log_prob == doctest::Approx(greedy[s].log_prob).epsilon(1e-6));
  }
}

TEST_CASE("Translator: teacher forcing agrees with incremental decoding, and bad options") {
  Generator gen(12);
  models::TranslatorOptions o = tiny_translator();
  o.tie_output = false;
  models::Translator model(o, gen);
  model.eval();
  NoGradGuard no_grad;
  const Tensor source = from_vector<int64_t>({5, 6, 7, 3}, {1, 4});
  const Tensor target_in = from_vector<int64_t>({2, 8, 9, 10}, {1, 4});
  Generator g(0);
  const Tensor logits = model.forward(source, Tensor(), target_in, Tensor(), g).logits;  // (1, 4, V)
  models::TranslatorDecoding d(model, source, Tensor(), models::Incremental::Yes, g);
  for (int64_t t = 0; t < 4; ++t) {
    const Tensor lp = d.next(slice(reshape(target_in, {4}), 0, t, t + 1));
    check_close(to(lp, DType::Float64), to(reshape(log_softmax(slice(logits, 1, t, t + 1)), {1, 13}), DType::Float64),
                1e-5, 1e-5);
  }
  models::TranslatorOptions bad = tiny_translator();
  bad.decoder_attention = attention::AttentionConfig::parse("clustered:clusters=2");
  check_error([&] { models::Translator m(bad, gen); },
              {"Translator", "decoder's self-attention must have a causal form", "improved-clustered", "clustered:"});
  // A decoder whose attention keeps no cache (local) re-runs the prefix: its last step is teacher
  // forcing's last position, with or without asking for the cache.
  models::TranslatorOptions local = tiny_translator();
  local.decoder_attention = attention::AttentionConfig::parse("local:window=1");
  models::Translator banded(local, gen);
  CHECK(!banded.has_decoder_cache());
  banded.eval();
  const Tensor forced = banded.forward(source, Tensor(), target_in, Tensor(), g).logits;
  for (const models::Incremental incremental : {models::Incremental::Yes, models::Incremental::No}) {
    models::TranslatorDecoding decoding(banded, source, Tensor(), incremental, g);
    Tensor lp;
    for (int64_t t = 0; t < 4; ++t) lp = decoding.next(slice(reshape(target_in, {4}), 0, t, t + 1));
    check_close(to(lp, DType::Float64), to(reshape(log_softmax(slice(forced, 1, 3, 4)), {1, 13}), DType::Float64),
                1e-5, 1e-5);
  }
  bad = tiny_translator();
  bad.vocabulary = 4;
  check_error([&] { models::Translator m(bad, gen); }, {"Translator", "vocabulary", "got 4"});
  check_error([&] { model.forward(source, Tensor(), zeros({2, 3}, {DType::Int64}), Tensor(), g); },
              {"Translator", "different numbers of sentences"});
}

TEST_CASE("Translator with a neural-clustering decoder: its losses join the encoder's; decoding re-runs the prefix") {
  Generator gen(13);
  models::TranslatorOptions o = tiny_translator();
  o.encoder_attention = attention::AttentionConfig::parse("neural-clustering:clusters=2");
  o.decoder_attention = attention::AttentionConfig::parse("neural-clustering:clusters=2");
  o.clustering = {0.5, 0.25};
  models::Translator model(o, gen);
  CHECK(!model.has_decoder_cache());
  CHECK(model.clustering_decoder != nullptr);
  CHECK(model.decoder == nullptr);
  model.eval();
  NoGradGuard no_grad;
  const Tensor source = from_vector<int64_t>({5, 6, 7, 3}, {1, 4});
  const Tensor target_in = from_vector<int64_t>({2, 8, 9, 10}, {1, 4});
  Generator g(0);
  const models::Translator::Output out = model.forward(source, Tensor(), target_in, Tensor(), g);
  // aux = µ·L1 + ν·L2 of the encoder plus the same of the decoder (eq. 17 for each stack).
  const nn::EncoderOutput memory = model.encode(source, Tensor(), g);
  const nn::ClusterFormerOutput d = model.clustering_decoder->forward(model.embed(target_in, 0), memory.output,
                                                                      Tensor(), Tensor(), g);
  const double expected = memory.aux_loss.item<double>() + 0.5 * d.clustering_loss.item<double>() +
                          0.25 * d.sorting_loss.item<double>();
  CHECK(out.aux_loss.item<double>() == doctest::Approx(expected).epsilon(1e-6));
  // Step t of decoding runs the decoder on the prefix 0..t: on the full target, its last position
  // is teacher forcing's; asking for the cache changes nothing (there is none).
  for (const models::Incremental incremental : {models::Incremental::Yes, models::Incremental::No}) {
    models::TranslatorDecoding decoding(model, source, Tensor(), incremental, g);
    Tensor lp;
    for (int64_t t = 0; t < 4; ++t) lp = decoding.next(slice(reshape(target_in, {4}), 0, t, t + 1));
    check_close(to(lp, DType::Float64), to(reshape(log_softmax(slice(out.logits, 1, 3, 4)), {1, 13}), DType::Float64),
                1e-5, 1e-5);
  }
  const auto best = models::translate(model, source, Tensor(), options(2, 1, 6, 1.0), g);
  CHECK(best.size() == 1);
}
