#include "apps/translate.h"

#include <cstdio>
#include <memory>

#include "apps/options.h"
#include "data/batch.h"
#include "data/translation_corpus.h"
#include "models/inspection.h"
#include "models/translation.h"

namespace tapestry::app {

using data::SentencePiece;

namespace {

constexpr const char* kTask = "translate";

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
  t.add("--encoder-attention", &O::encoder_attention,
        "the encoder's self-attention, KIND or KIND:KEY=VALUE,... (the kinds: --attention of tapestry copy-task)",
        {}, Recorded::Model);
  t.add("--decoder-attention", &O::decoder_attention,
        "the decoder's causal self-attention: " +
            attention::kind_names([](const attention::Kind& k) { return k.has_causal_form(); }) +
            " (" + attention::kind_names([](const attention::Kind& k) { return k.decodes_incrementally(); }) +
            " decode with the key/value cache, the others re-run the prefix)",
        {}, Recorded::Model);
  t.add("--eval-attention", &O::eval_attention, "the encoder's attention at evaluation (default: --encoder-attention)");
  add_clustering_weights(t, &O::mu, &O::nu);
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


// ---- data ----

void note(const std::string& line) { std::fprintf(stderr, "translate: %s\n", line.c_str()); }

// What every run works on: the SentencePiece model (a checkpoint's, else trained; written to each of
// spm_paths) and the encoded training and evaluation pairs.
data::TranslationCorpus prepare(const TranslateOptions& o, const std::vector<std::string>& spm_paths) {
  data::TranslationCorpusOptions c{o.data, o.source_lang, o.target_lang, o.max_pairs, o.vocab_size, o.max_length,
                                   o.max_tokens, o.eval_split, o.eval_sentences, nullptr, spm_paths,
                                   {kTask, "--data", "--vocab-size", "--max-length", "--max-tokens"}, note,
                                   o.train.progress ? note : nullptr};
  if (!o.train.resume.empty()) c.load_sentencepiece = [&o] { return translate_vocabulary(o); };
  return data::prepare_translation_corpus(c);
}

class TranslateRun : public InspectableTask {
 public:
  TranslateRun(const data::TranslationCorpus& p, const TranslateOptions& o, const Attentions& a, Generator& gen,
               Device device, const dist::World& world)
      : InspectableTask({o.mu, o.nu, train::derived_seed(o.train.seed, 4)}),
        p_(p),
        o_(o),
        a_(a),
        device_(device),
        model_(translator_options(o), gen),
        sampler_(p.train_sampler(o.max_tokens, train::derived_seed(o.train.seed, 3), world.rank(), world.size())),
        eval_batches_(p.eval_batches(o.max_tokens)),
        eval_seed_(train::derived_seed(o.train.seed, 2)) {
    model_.to(device);
  }

  nn::Module& model() override { return model_; }

  train::Step step(Generator& gen) override {
    const models::TranslatedBatch b = models::translation_batch(model_, p_.train, sampler_.next(), device_, gen);
    const Tensor loss = models::translation_loss(b, o_.label_smoothing);
    return {b.out.objective(loss), loss.item<double>(), {}, double(b.tokens)};
  }

  void use_attention(train::Phase p) override { model_.set_encoder_attention(p == train::Phase::Evaluation ? a_.eval : a_.train); }

  train::Evaluation evaluate() override {
    Generator gen(eval_seed_);
    train::Metrics m =
        models::evaluate_translation(model_, *p_.sp, p_.eval, eval_batches_, translation_search(o_), device_, gen);
    return {m, double(p_.eval.size())};
  }

  nlohmann::json data_state() const override { return sampler_state(sampler_); }
  void load_data_state(const nlohmann::json& state) override { restore_sampler(sampler_, state); }

  // Something to inspect in the encoder's self-attention or in the decoder's.
  std::string cannot_inspect() const override { return models::translator_not_inspected(model_); }

  // The encoder and a neural-clustering decoder, with their training attentions.
  models::Inspection inspection(int64_t batches, uint64_t seed) override {
    const std::vector<int64_t> rows = first_batches(eval_batches_, batches);
    return models::inspect(
        model_,
        [&](Generator& gen) {
          return models::inspected_translation(model_, models::translation_batch(model_, p_.eval, rows, device_, gen),
                                               o_.label_smoothing);
        },
        inspection_options(seed));
  }

 private:
  const data::TranslationCorpus& p_;
  TranslateOptions o_;
  Attentions a_;  // the encoder's, for training and for evaluation
  Device device_;
  models::Translator model_;
  data::BatchSampler sampler_;  // over the training pairs
  data::BatchList eval_batches_;
  uint64_t eval_seed_;
};

}  // namespace

std::shared_ptr<OptionTable<TranslateOptions>> translate_table() {
  return std::make_shared<OptionTable<TranslateOptions>>(make_table());
}

SentencePiece translate_vocabulary(const TranslateOptions& o) {
  SentencePiece sp = data::checkpoint_sentencepiece(o.train.resume, o.vocab_size, "--resume", "--vocab-size");
  check_vocabulary(sp.fingerprint(), o.train.resume + ".spm", o.train.resume);
  return sp;
}

models::TranslationSearch translation_search(const TranslateOptions& o) {
  return {o.beam, o.lenpen, o.max_ratio, o.cache ? models::Incremental::Yes : models::Incremental::No, o.max_tokens};
}

models::TranslatorOptions translator_options(const TranslateOptions& o) {
  return {o.vocab_size, o.encoder_layers, o.decoder_layers, o.heads, o.head_dim, o.ff, o.dropout, o.tie_output,
          o.encoder_attention, o.decoder_attention, {o.mu, o.nu}};
}

TranslateOptions::TranslateOptions() {
  train.optimizer = optim::OptimizerConfig::parse("adam:lr=5e-4,beta2=0.98");
  train.schedule = optim::ScheduleConfig::parse("inverse-sqrt:warmup=4000");
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
    o.train.optimizer = optim::OptimizerConfig::parse("adam:lr=2e-3,beta2=0.98");
    o.train.schedule = optim::ScheduleConfig::parse("inverse-sqrt:warmup=200");
    o.train.steps = 1500;
    o.train.eval_every = 500;
    o.eval_sentences = 200;
  }
  return o;
}

Attentions check_translate_options(const TranslateOptions& o) {
  table().check(o);
  train::check_options(o.train);
  check_model_width(o.heads, o.head_dim);
  TP_CHECK(o.source_lang != o.target_lang, "--target-lang", "source and target files need different suffixes, both are '",
           o.source_lang, "'");
  TP_CHECK(o.decoder_attention.kind().has_causal_form(), "--decoder-attention", "the decoder's self-attention must have ",
           "a causal form (", attention::kind_names([](const attention::Kind& k) { return k.has_causal_form(); }),
           "), got '", o.decoder_attention.to_string(), "'");
  const Attentions encoder = attentions(o.encoder_attention, o.eval_attention);  // refuses pairs that cannot work
  check_clustering_weights(o.mu, o.nu, {encoder.train, o.decoder_attention});
  return encoder;
}

namespace {

PreparedRun prepare_translate(const TranslateOptions& o) {
  const Attentions a = attentions(o.encoder_attention, o.eval_attention);
  const auto p = std::make_shared<const data::TranslationCorpus>(prepare(o, vocabulary_paths(o.train)));
  train::RunSpec spec;
  spec.identity = table().identity(kTask, o);
  record_vocabulary(spec.identity, p->sp->fingerprint(), o.train.resume);
  spec.best = {"bleu", train::Goal::Max};
  spec.log_fields = {{"data", o.data},
                     {"encoder_attention", a.train.to_string()},
                     {"decoder_attention", o.decoder_attention.to_string()},
                     {"eval_attention", a.eval.to_string()},
                     {"eval_split", o.eval_split},
                     {"beam", o.beam},
                     {"pairs", {{"train", p->train.size()}, {o.eval_split, p->eval.size()}}},
                     {"empty_pairs", p->train.empty},
                     {"long_pairs", p->train.too_long}};
  return {spec, [p, o, a](Generator& gen, Device device, const dist::World& world) {
            return std::make_unique<TranslateRun>(*p, o, a, gen, device, world);
          }};
}

TrainingApp<TranslateOptions> translate_train_app() {
  TrainingApp<TranslateOptions> app;
  app.name = "train";
  app.task = kTask;  // --eval-only --resume reads the checkpoint's settings
  app.description = "Train a translation model (German->English by default); flags override the preset's values";
  // Each command parses into a table of its own (a table reads the flags of the command it was added to last).
  app.table = translate_table();
  app.check = check_translate_options;
  app.prepare = prepare_translate;
  app.run = run_translate;
  app.inspected = [](TranslateOptions& o, const CheckpointRequest& request) {
    o.train.resume = request.path;  // its SentencePiece model is beside it
    o.train.progress = false;
  };
  app.headline = [](const TranslateOptions& o, const train::Report& r) {
    return std::string(kTask) + ": " + o.data + " " + o.source_lang + "->" + o.target_lang + ", " + o.eval_split +
           " split, step " + std::to_string(r.steps) + ", encoder " + r.fields.at("encoder_attention").get<std::string>() +
           ", decoder " + r.fields.at("decoder_attention").get<std::string>() +
           (o.beam > 1 ? ", beam " + std::to_string(o.beam) : ", greedy");
  };
  return app;
}

}  // namespace

train::Report run_translate(const TranslateOptions& o) {
  check_translate_options(o);
  return run_prepared(prepare_translate(o), o.train);
}

InspectedCheckpoint inspect_translate_checkpoint(const CheckpointRequest& request) {
  return inspect_app_checkpoint(translate_train_app(), request);
}

void add_translate(CommandLine& cli) {
  CLI::App* group = cli.add_group(kTask, "Machine translation: train an encoder-decoder Transformer, evaluate it "
                                         "(BLEU), or translate stdin with it");
  const TrainingApp<TranslateOptions> train_app = translate_train_app();
  add_training_app(cli, train_app, group);

  add_eval_app(cli, train_app, translate_table(), eval_flags(), kTask,
               "BLEU and loss of the --resume checkpoint on --eval-split (its settings are read from it)", group);

  add_translate_run(cli, group);
  add_translate_score(cli, group);
}

}  // namespace tapestry::app
