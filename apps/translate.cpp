#include "apps/translate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <numeric>

#include "apps/options.h"
#include "core/autograd.h"
#include "data/batch.h"
#include "data/datasets.h"
#include "data/parallel_text.h"
#include "data/sentencepiece.h"
#include "data/text_lines.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "models/inspection.h"
#include "models/translator.h"
#include "ops/loss.h"
#include "ops/shape.h"

namespace tapestry::app {

namespace fs = std::filesystem;
using data::SentencePiece;

namespace {

constexpr const char* kTask = "translate";
constexpr int64_t kBatchingWindow = 64 * 1024;  // training pairs sorted together (data/batch.h)
constexpr int64_t kMaxSourcePieces = 1024;      // per sentence translated (translate.h)

OptionTable<TranslateOptions> make_table() {
  using O = TranslateOptions;
  OptionTable<O> t({{"small", translate_preset(TranslatePreset::Small)},
                    {"smoke", translate_preset(TranslatePreset::Smoke)}});
  t.add("--data", &O::data, "de-en, or a folder of line-aligned {train,valid,test}.{SRC,TGT} files", {},
        Recorded::Training);
  t.add("--source-lang", &O::source_lang, "SRC: the source files' suffix", {}, Recorded::Training);
  t.add("--target-lang", &O::target_lang, "TGT: the target files' suffix", {}, Recorded::Training);
  t.add("--max-pairs", &O::max_pairs, "train on the first N pairs of the training split (0: all)",
        between(0, int64_t{1} << 40), Recorded::Training);
  t.add("--vocab-size", &O::vocab_size, "SentencePiece pieces of the joint vocabulary", between(8, 1 << 20),
        Recorded::Model);
  t.add("--max-length", &O::max_length, "pieces per side of a training pair (longer pairs are left out)",
        between(1, 1 << 20), Recorded::Training);
  t.add("--max-tokens", &O::max_tokens, "padded tokens per training batch", between(1, int64_t{1} << 30),
        Recorded::Training);
  t.add("--encoder-layers", &O::encoder_layers, "encoder layers", between(1, 1024), Recorded::Model);
  t.add("--decoder-layers", &O::decoder_layers, "decoder layers", between(1, 1024), Recorded::Model);
  t.add("--heads", &O::heads, "attention heads", between(1, 4096), Recorded::Model);
  t.add("--head-dim", &O::head_dim, "width of each head (model width = heads x head-dim)", between(1, 65536),
        Recorded::Model);
  t.add("--ff", &O::ff, "feed-forward width", between(1, 1 << 20), Recorded::Model);
  t.add("--dropout", &O::dropout, "dropout probability", in_range(0, 1, Bounds::HighOpen), Recorded::Training);
  t.add("--tie-output", &O::tie_output, "the output projection is the embedding table (--tie-output=false: its own)",
        {}, Recorded::Model);
  const auto config = parsed_by([](const std::string& text) { attention::AttentionConfig::parse(text); },
                                "an attention config");
  t.add("--encoder-attention", &O::encoder_attention,
        "the encoder's self-attention, KIND or KIND:KEY=VALUE,... (the kinds: --attention of tapestry copy-task)",
        config, Recorded::Model);
  t.add("--decoder-attention", &O::decoder_attention,
        "the decoder's causal self-attention: " +
            attention::kind_names([](const attention::Kind& k) { return k.has_causal_form(); }) +
            " (" + attention::kind_names([](const attention::Kind& k) { return k.decodes_incrementally(); }) +
            " decode with the key/value cache, the others re-run the prefix)",
        config, Recorded::Model);
  Check<std::string> optional_config{[config](const std::string& text) {
                                       return text.empty() ? std::string() : config.problem(text);
                                     },
                                     config.allowed};
  t.add("--eval-attention", &O::eval_attention, "the encoder's attention at evaluation (default: --encoder-attention)",
        optional_config);
  t.add("--mu", &O::mu, "neural-clustering: weight µ of the clustering loss L1", in_range(0, 1e6), Recorded::Training);
  t.add("--nu", &O::nu, "neural-clustering: weight ν of the centroid sorting loss L2", in_range(0, 1e6),
        Recorded::Training);
  t.add("--label-smoothing", &O::label_smoothing, "ε of the label-smoothed cross-entropy",
        in_range(0, 1, Bounds::HighOpen), Recorded::Training);
  t.add("--eval-split", &O::eval_split, "the split evaluations translate", one_of({"valid", "test", "train"}));
  t.add("--eval-sentences", &O::eval_sentences, "evaluate on the first N pairs of the split (0: all)",
        between(0, int64_t{1} << 40));
  t.add("--beam", &O::beam, "beam size (1: greedy search)", between(1, 1024));
  t.add("--lenpen", &O::lenpen, "beam search's length penalty: scores are log p / length^lenpen", in_range(-10, 10));
  t.add("--cache", &O::cache,
        "decode with each decoder layer's keys and values kept (--cache=false re-runs the decoder on the prefix)");
  t.add("--max-ratio", &O::max_ratio, "translations have at most ceil(ratio x source pieces) + 10 pieces",
        in_range(0, 1000));
  add_train_options(t, &O::train);
  return t;
}

// What `translate eval` takes: the checkpoint, the data it is scored on and how it is decoded; the
// model and training settings come from the checkpoint.
std::vector<std::string> eval_flags() {
  return {"--resume", "--data", "--source-lang", "--target-lang", "--eval-split", "--eval-sentences",
          "--eval-attention", "--beam", "--lenpen", "--max-ratio", "--cache", "--max-tokens", "--seed",
          "--device", "--threads", "--log"};
}

const OptionTable<TranslateOptions>& table() {
  static const OptionTable<TranslateOptions> t = make_table();
  return t;
}

attention::AttentionConfig eval_attention(const TranslateOptions& o) {
  return attention::AttentionConfig::parse(o.eval_attention.empty() ? o.encoder_attention : o.eval_attention);
}

// ---- data ----

// The corpus folder --data names: a folder as it is, else a prepared data set.
std::string corpus_folder(const TranslateOptions& o) {
  std::error_code error;
  if (fs::is_directory(o.data, error)) return o.data;
  TP_CHECK(!fs::exists(o.data, error), "--data", "'", o.data, "' is a file; give de-en or a folder of line-aligned ",
           "{train,valid,test}.", o.source_lang, " and .", o.target_lang, " files");
  return data::dataset_directory(o.data);
}

// The file of `split` (train, valid, test) in language `lang`.
std::string split_path(const TranslateOptions& o, const std::string& split, const std::string& lang) {
  return corpus_folder(o) + "/" + split + "." + lang;
}

std::vector<data::SentencePair> read_split(const TranslateOptions& o, const std::string& split) {
  return data::read_parallel_text(split_path(o, split, o.source_lang), split_path(o, split, o.target_lang));
}

// Refuses a source of more than kMaxSourcePieces pieces, naming `where` and its line: its
// attention and its decoding would take memory and time without bound.
void check_source_length(int64_t pieces, const std::string& where, int64_t line) {
  TP_CHECK(pieces <= kMaxSourcePieces, kTask, where, ", line ", line, ": ", pieces,
           " pieces, more than the limit of ", kMaxSourcePieces, " for one sentence (split it into sentences)");
}

// What every run works on: the SentencePiece model and the encoded training and evaluation pairs.
struct Prepared {
  std::unique_ptr<SentencePiece> sp;
  data::EncodedPairs train, eval;
};

SentencePiece load_sentencepiece(const TranslateOptions& o) {
  const std::string path = o.train.resume + ".spm";
  std::error_code error;
  TP_CHECK(fs::is_regular_file(path, error), "--resume", "'", o.train.resume,
           "' has no SentencePiece model beside it (expected '", path, "'): a translation checkpoint needs its vocabulary");
  SentencePiece sp = SentencePiece::load(path);
  TP_CHECK(sp.vocab_size() == o.vocab_size, "--resume", "'", path, "' holds ", sp.vocab_size(),
           " pieces, but the model has --vocab-size ", o.vocab_size, ": it is not this checkpoint's vocabulary");
  check_vocabulary(sp.fingerprint(), path, o.train.resume);
  return sp;
}

Prepared prepare(const TranslateOptions& o, const std::vector<std::string>& spm_paths) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<data::SentencePair> train = read_split(o, "train");
  if (o.max_pairs > 0 && int64_t(train.size()) > o.max_pairs) train.resize(size_t(o.max_pairs));
  std::vector<data::SentencePair> eval = o.eval_split == "train" ? train : read_split(o, o.eval_split);
  if (o.eval_sentences > 0 && int64_t(eval.size()) > o.eval_sentences) eval.resize(size_t(o.eval_sentences));

  Prepared p;
  if (!o.train.resume.empty()) {
    p.sp = std::make_unique<SentencePiece>(load_sentencepiece(o));
  } else {  // on both sides of the pairs that will be trained on
    std::vector<std::string> text;
    for (const data::SentencePair& pair : train)
      if (!pair.source.empty() && !pair.target.empty()) text.push_back(pair.source), text.push_back(pair.target);
    TP_CHECK(!text.empty(), "--data", "the training split of '", o.data, "' has no pair with both sides non-empty");
    data::SentencePieceOptions spm;
    spm.vocab_size = o.vocab_size;
    try {
      p.sp = std::make_unique<SentencePiece>(SentencePiece::train_sentences(text, spm));
    } catch (const Error& e) {
      fail("--vocab-size", "SentencePiece could not train ", o.vocab_size, " pieces on the training split (",
           text.size() / 2, " pairs); a smaller --vocab-size may fit: ", e.what());
    }
  }
  for (const std::string& path : spm_paths) p.sp->save(path);

  p.train = data::encode_pairs(*p.sp, train, data::Filter::Training, o.max_length);
  TP_CHECK(p.train.empty < int64_t(train.size()), "--data", "the training split of '", o.data,
           "' has no pair with both sides non-empty");
  TP_CHECK(p.train.size() > 0, "--max-length", "every training pair is longer than ", o.max_length, " pieces");
  p.eval = data::encode_pairs(*p.sp, eval, data::Filter::None);
  // Evaluation translates every pair: one too long to translate is refused before any work.
  for (size_t i = 0; i < p.eval.source.size(); ++i)
    check_source_length(int64_t(p.eval.source[i].size()) - 1, split_path(o, o.eval_split, o.source_lang), int64_t(i) + 1);
  const int64_t longest = *std::max_element(p.train.lengths.begin(), p.train.lengths.end());
  TP_CHECK(longest <= o.max_tokens, "--max-tokens", "a batch of ", o.max_tokens, " tokens cannot hold the longest ",
           "training pair (", longest, " pieces with eos); give --max-tokens ", longest, " or more, or a --max-length ",
           "below ", longest - 1);
  if (p.train.empty > 0)
    std::fprintf(stderr, "translate: left out %lld training pair(s) with an empty side\n", (long long)p.train.empty);
  if (p.train.too_long > 0)
    std::fprintf(stderr, "translate: left out %lld training pair(s) longer than --max-length %lld pieces\n",
                 (long long)p.train.too_long, (long long)o.max_length);
  if (o.train.progress)
    std::fprintf(stderr, "translate: %lld training pairs, %lld %s pairs, %lld pieces, prepared in %.1f s\n",
                 (long long)p.train.size(), (long long)p.eval.size(), o.eval_split.c_str(),
                 (long long)p.sp->vocab_size(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return p;
}

// ---- the model ----

nn::decode::SearchOptions search_options(const TranslateOptions& o, const std::vector<int64_t>& source_pieces) {
  nn::decode::SearchOptions s;
  s.beam = o.beam;
  s.length_penalty = o.lenpen;
  s.bos = SentencePiece::kBosId;
  s.eos = SentencePiece::kEosId;
  for (const int64_t n : source_pieces) s.max_lengths.push_back(int64_t(std::ceil(o.max_ratio * double(n))) + 10);
  return s;
}

// Translations of `sources` (encoded, eos last), in order, by batches of about max_tokens / beam
// source tokens.
std::vector<std::string> translate_sources(models::Translator& model, const SentencePiece& sp,
                                           const std::vector<std::vector<int64_t>>& sources, const TranslateOptions& o,
                                           Device device, Generator& gen) {
  std::vector<std::string> out(sources.size());
  if (sources.empty()) return out;
  std::vector<int64_t> lengths;
  for (const auto& s : sources) lengths.push_back(int64_t(s.size()));
  data::BatchingOptions b;
  b.max_tokens = std::max<int64_t>(1, o.max_tokens / o.beam);
  b.shuffle = data::Shuffle::No;
  b.oversize = data::Oversize::Alone;
  for (const std::vector<int64_t>& rows : data::bucket_batches(lengths, b)) {
    const data::Batch batch = data::make_batch(sources, rows);
    std::vector<int64_t> pieces;
    for (const int64_t r : rows) pieces.push_back(lengths[size_t(r)] - 1);
    const auto best = models::translate(model, to(batch.tokens, device), to(batch.lengths, device),
                                        search_options(o, pieces), gen,
                                        o.cache ? models::Incremental::Yes : models::Incremental::No);
    for (size_t i = 0; i < rows.size(); ++i) out[size_t(rows[i])] = sp.decode(best[i].tokens);
  }
  return out;
}

class TranslateRun : public InspectableTask {
 public:
  TranslateRun(const Prepared& p, const TranslateOptions& o, Generator& gen, Device device, const dist::World& world)
      : InspectableTask({o.mu, o.nu, train::derived_seed(o.train.seed, 4)}),
        p_(p),
        o_(o),
        device_(device),
        model_(translator_options(o), gen),
        sampler_(p.train.lengths, batching(o), train::derived_seed(o.train.seed, 3), world.rank(), world.size()),
        eval_seed_(train::derived_seed(o.train.seed, 2)) {
    model_.to(device);
    data::BatchingOptions b = batching(o);
    b.shuffle = data::Shuffle::No;
    b.oversize = data::Oversize::Alone;
    eval_batches_ = data::bucket_batches(p.eval.lengths, b);
  }

  nn::Module& model() override { return model_; }

  train::Step step(Generator& gen) override {
    const Forward f = forward(p_.train, sampler_.next(), gen);
    const Tensor loss = cross_entropy(f.out.logits, f.target_out, SentencePiece::kPadId, o_.label_smoothing);
    return {f.out.objective(loss), loss.item<double>(), {}, double(f.tokens)};
  }

  train::Evaluation evaluate() override {
    model_.set_encoder_attention(eval_attention(o_));
    Generator gen(eval_seed_);
    double nll = 0;
    int64_t tokens = 0;
    for (const auto& rows : eval_batches_) {
      const Forward f = forward(p_.eval, rows, gen);
      nll += cross_entropy(f.out.logits, f.target_out, SentencePiece::kPadId).item<double>() * double(f.tokens);
      tokens += f.tokens;
    }
    const auto start = std::chrono::steady_clock::now();
    const std::vector<std::string> hypotheses = translate_sources(model_, *p_.sp, p_.eval.source, o_, device_, gen);
    const double decode_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const metrics::BleuScore bleu = metrics::corpus_bleu(hypotheses, p_.eval.references);
    metrics::ChrF chrf;
    for (size_t i = 0; i < hypotheses.size(); ++i) chrf.add(hypotheses[i], p_.eval.references[i]);
    model_.set_encoder_attention(attention::AttentionConfig::parse(o_.encoder_attention));
    return {{{"bleu", bleu.score},
             {"loss", nll / double(std::max<int64_t>(tokens, 1))},
             {"bp", bleu.bp},
             {"chrf", chrf.score()},
             {"decode_sentences_per_second", double(p_.eval.size()) / std::max(decode_seconds, 1e-9)}},
            double(p_.eval.size())};
  }

  nlohmann::json data_state() const override { return sampler_state(sampler_); }
  void load_data_state(const nlohmann::json& state) override { restore_sampler(sampler_, state); }

  // Something to inspect in the encoder's self-attention or in the decoder's.
  std::string cannot_inspect() const override {
    const std::string encoder = models::nothing_to_inspect(model_.options().encoder_attention);
    // A Transformer decoder's layers are not traced (Translator::Output has a ClusterFormer decoder's).
    const std::string decoder = model_.clustering_decoder ? models::nothing_to_inspect(model_.options().decoder_attention)
                                                          : "only a ClusterFormer decoder is inspected";
    return encoder.empty() || decoder.empty() ? "" : "encoder: " + encoder + "; decoder: " + decoder;
  }

  // The encoder and a neural-clustering decoder, with their training attentions.
  models::Inspection inspection(int64_t batches, uint64_t seed) override {
    const std::vector<int64_t> rows = first_batches(eval_batches_, batches);
    return models::inspect(
        model_,
        [&](Generator& gen) {
          const Forward f = forward(p_.eval, rows, gen);
          models::InspectedPass pass;
          pass.stacks.push_back({"encoder", model_.encoder, model_.options().encoder_attention, f.out.encoder_layers,
                                 f.source_lengths});
          if (model_.clustering_decoder)
            pass.stacks.push_back({"decoder", model_.clustering_decoder, model_.options().decoder_attention,
                                   f.out.decoder_layers, f.target_lengths});
          pass.task_loss = cross_entropy(f.out.logits, f.target_out, SentencePiece::kPadId, o_.label_smoothing);
          return pass;
        },
        inspection_options(seed));
  }

 private:
  struct Forward {
    models::Translator::Output out;
    Tensor target_out;
    Tensor source_lengths, target_lengths;  // (B) int64
    int64_t tokens = 0;  // target tokens
  };

  Forward forward(const data::EncodedPairs& c, const std::vector<int64_t>& rows, Generator& gen) {
    const data::Batch source = data::make_batch(c.source, c.target_out, rows);
    const data::Batch target_in = data::make_batch(c.target_in, rows);
    Forward f;
    for (const int64_t r : rows) f.tokens += int64_t(c.target_out[size_t(r)].size());
    f.target_out = to(source.targets, device_);
    f.source_lengths = to(source.lengths, device_);
    f.target_lengths = to(target_in.lengths, device_);
    f.out = model_.forward(to(source.tokens, device_), f.source_lengths, to(target_in.tokens, device_),
                           f.target_lengths, gen);
    return f;
  }

  static data::BatchingOptions batching(const TranslateOptions& o) {
    data::BatchingOptions b;
    b.max_tokens = o.max_tokens;
    b.window = kBatchingWindow;
    return b;
  }

  const Prepared& p_;
  TranslateOptions o_;
  Device device_;
  models::Translator model_;
  data::BatchSampler sampler_;  // over the training pairs
  data::BatchList eval_batches_;
  uint64_t eval_seed_;
};

// The checkpoints a run writes, each of which gets the SentencePiece model beside it.
std::vector<std::string> spm_paths(const TranslateOptions& o) {
  std::vector<std::string> paths;
  for (const std::string& checkpoint : {o.train.save, o.train.save_best})
    if (!checkpoint.empty() && checkpoint != o.train.resume) paths.push_back(checkpoint + ".spm");
  return paths;
}

}  // namespace

models::TranslatorOptions translator_options(const TranslateOptions& o) {
  models::TranslatorOptions m;
  m.vocabulary = o.vocab_size;
  m.encoder_layers = o.encoder_layers;
  m.decoder_layers = o.decoder_layers;
  m.heads = o.heads;
  m.head_dim = o.head_dim;
  m.ff = o.ff;
  m.dropout = o.dropout;
  m.tie_output = o.tie_output;
  m.encoder_attention = attention::AttentionConfig::parse(o.encoder_attention);
  m.decoder_attention = attention::AttentionConfig::parse(o.decoder_attention);
  m.clustering = {o.mu, o.nu};
  return m;
}

TranslateOptions::TranslateOptions() {
  train.optimizer = "adam:lr=5e-4,beta2=0.98";
  train.schedule = "inverse-sqrt:warmup=4000";
  train.steps = 20000;
  train.eval_every = 1000;
}

TranslateOptions translate_preset(TranslatePreset preset) {
  TranslateOptions o;  // Small: 3 + 3 layers, 4 heads of 64 (D = 256), FF 1024
  if (preset == TranslatePreset::Smoke) {
    o.encoder_layers = o.decoder_layers = 2;
    o.heads = 4;
    o.head_dim = 16;
    o.ff = 256;
    o.vocab_size = 2000;
    o.max_tokens = 2048;
    o.train.optimizer = "adam:lr=2e-3,beta2=0.98";
    o.train.schedule = "inverse-sqrt:warmup=200";
    o.train.steps = 1500;
    o.train.eval_every = 500;
    o.eval_sentences = 200;
  }
  return o;
}

void check_translate_options(const TranslateOptions& o) {
  table().check(o);
  train::check_options(o.train);
  TP_CHECK(o.source_lang != o.target_lang, "--target-lang", "source and target files need different suffixes, both are '",
           o.source_lang, "'");
  const attention::AttentionConfig decoder = attention::AttentionConfig::parse(o.decoder_attention);
  TP_CHECK(decoder.kind().has_causal_form(), "--decoder-attention", "the decoder's self-attention must have a causal ",
           "form (", attention::kind_names([](const attention::Kind& k) { return k.has_causal_form(); }), "), got '",
           o.decoder_attention, "'");
  attentions(o.encoder_attention, o.eval_attention);  // refuses pairs that cannot work (apps/options.h)
  check_clustering_weights(o.mu, o.nu, {o.encoder_attention, o.decoder_attention});
}

train::Report run_translate(const TranslateOptions& o) {
  check_translate_options(o);
  const Prepared p = prepare(o, spm_paths(o));
  train::RunSpec spec;
  spec.identity = table().identity(kTask, o);
  record_vocabulary(spec.identity, p.sp->fingerprint(), o.train.resume);
  spec.best = {"bleu", train::Goal::Max};
  spec.log_fields = {{"data", o.data},
                     {"encoder_attention", attention::AttentionConfig::parse(o.encoder_attention).to_string()},
                     {"eval_attention", eval_attention(o).to_string()},
                     {"eval_split", o.eval_split},
                     {"beam", o.beam},
                     {"pairs", {{"train", p.train.size()}, {o.eval_split, p.eval.size()}}},
                     {"empty_pairs", p.train.empty},
                     {"long_pairs", p.train.too_long}};
  train::Trainer trainer(spec, o.train);
  return trainer.run([&](Generator& gen, Device device) {
    return std::make_unique<TranslateRun>(p, o, gen, device, trainer.world());
  });
}

InspectedCheckpoint inspect_translate_checkpoint(const CheckpointRequest& request) {
  TranslateOptions o;
  table().apply(o, recorded_settings(request.path, kTask, request.flag));
  o.train.resume = request.path;  // its SentencePiece model is beside it
  o.train.progress = false;
  check_translate_options(o);
  const Prepared p = prepare(o, {});
  Generator gen(o.train.seed);
  TranslateRun run(p, o, gen, Device::cpu(), dist::World());
  return inspect_restored(run, request, table().identity(kTask, o));
}

LineTranslator::LineTranslator(const TranslateOptions& o)
    : o_(o),
      sp_(std::make_unique<SentencePiece>(load_sentencepiece(o))),
      device_(train::resolve_device(o.train.device)),
      decoding_(train::derived_seed(o.train.seed, 2)) {
  check_translate_options(o);
  TP_CHECK(!o.train.resume.empty(), "--resume", "translating needs a checkpoint");
  Generator gen(o.train.seed);
  model_ = std::make_unique<models::Translator>(translator_options(o), gen);
  train::ResumedRun(o.train.resume, table().identity(kTask, o), train::Compare::ModelOnly).restore_model(*model_);
  model_->to(device_);
  model_->set_encoder_attention(eval_attention(o));
}

LineTranslator::~LineTranslator() = default;

std::vector<std::string> LineTranslator::translate(const std::vector<std::string>& lines, int64_t first_line) {
  const train::ScopedThreads threads(o_.train.threads);
  std::vector<std::vector<int64_t>> sources;
  std::vector<size_t> where;  // the line of each source
  for (size_t i = 0; i < lines.size(); ++i) {
    const int64_t line = first_line + int64_t(i);
    const size_t bad = data::invalid_utf8_offset(lines[i]);
    TP_CHECK(bad == std::string_view::npos, "translate run", "line ", line, " of the input is not valid UTF-8 (byte ",
             bad + 1, ")");
    TP_CHECK(lines[i].size() <= data::kMaxLineBytes, "translate run", "line ", line, " of the input is longer than ",
             "the limit of ", data::kMaxLineBytes, " bytes");
    if (lines[i].empty()) continue;
    std::vector<int64_t> ids = sp_->encode(lines[i]);
    check_source_length(int64_t(ids.size()), "the input", line);
    ids.push_back(SentencePiece::kEosId);
    sources.push_back(std::move(ids));
    where.push_back(i);
  }
  const std::vector<std::string> translated = translate_sources(*model_, *sp_, sources, o_, device_, decoding_);
  std::vector<std::string> out(lines.size());
  for (size_t i = 0; i < where.size(); ++i) out[where[i]] = translated[i];
  return out;
}

std::vector<std::string> translate_lines(const TranslateOptions& o, const std::vector<std::string>& lines) {
  return LineTranslator(o).translate(lines);
}

void add_translate(CommandLine& cli) {
  CLI::App* group = cli.add_group(kTask, "Machine translation: train an encoder-decoder Transformer, evaluate it "
                                         "(BLEU), or translate stdin with it");
  const auto headline = [](const TranslateOptions& o, const train::Report& r) {
    return std::string(kTask) + ": " + o.data + " " + o.source_lang + "->" + o.target_lang + ", " + o.eval_split +
           " split, step " + std::to_string(r.steps) + ", encoder " + r.fields.at("encoder_attention").get<std::string>() +
           (o.beam > 1 ? ", beam " + std::to_string(o.beam) : ", greedy");
  };
  TrainingApp<TranslateOptions> train_app;
  train_app.name = "train";
  train_app.description = "Train a translation model (German->English by default); flags override the preset's values";
  // Each command parses into a table of its own (a table reads the flags of the command it was added to last).
  train_app.table = std::make_shared<OptionTable<TranslateOptions>>(make_table());
  train_app.check = check_translate_options;
  train_app.run = run_translate;
  train_app.headline = headline;
  add_training_app(cli, train_app, group);

  TrainingApp<TranslateOptions> eval_app = train_app;
  eval_app.name = "eval";
  eval_app.description = "BLEU and loss of the --resume checkpoint on --eval-split (its settings are read from it)";
  eval_app.table = std::make_shared<OptionTable<TranslateOptions>>(make_table());
  eval_app.flags = eval_flags();
  read_settings_from_resume(eval_app, kTask);
  eval_app.run = [](const TranslateOptions& options) {
    TranslateOptions o = options;
    o.train.eval_only = true;
    return run_translate(o);
  };
  add_training_app(cli, eval_app, group);

  cli.add(
      "run", "Translate the lines of stdin to stdout with the --resume checkpoint (an empty line stays empty)",
      [](CLI::App& command) {
        TrainingApp<TranslateOptions> run_app;
        run_app.name = "run";
        run_app.table = std::make_shared<OptionTable<TranslateOptions>>(make_table());
        run_app.flags = {"--resume", "--eval-attention", "--beam", "--lenpen", "--max-ratio", "--cache", "--max-tokens",
                         "--seed", "--device", "--threads"};
        run_app.check = check_translate_options;
        read_settings_from_resume(run_app, kTask);
        run_app.table->add_to(command, run_app.flags);
        return [run_app]() {
          TranslateOptions o;
          if (const int code = resolve_options(run_app, "translate run", o); code != 0) return code;
          return run_reporting_errors("translate run", [&] {
            // Line by line: at a terminal each translation appears as its line is typed.
            LineTranslator translator(o);
            data::LineReader input("translate run", "the input", stdin, data::Utf8::Check);
            for (std::string line; input.next(line);) {
              std::printf("%s\n", translator.translate({line}, input.line_number())[0].c_str());
              std::fflush(stdout);
            }
            return 0;
          });
        };
      },
      group);
  add_translate_score(cli, group);
}

}  // namespace tapestry::app
