#include "apps/classify.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "apps/options.h"
#include "core/device.h"
#include "data/batch.h"
#include "models/classifier.h"
#include "models/document_classification.h"
#include "models/inspection.h"
#include "train/profiling.h"

namespace tapestry::app {

namespace {

constexpr const char* kTask = "classify";

OptionTable<ClassifyOptions> make_table() {
  using O = ClassifyOptions;
  OptionTable<O> t({{"default", classify_preset(ClassifyPreset::Default)},
                    {"smoke", classify_preset(ClassifyPreset::Smoke)}});
  t.add("--data", &O::data,
        "brown, spam-assassin (5 groups), spam-assassin-2way (ham/spam), or a path: a folder per class or a "
        "list file of path<TAB>label lines",
        {}, Recorded::Training);
  t.add("--layout", &O::layout, "for a --data path: auto chooses by whether it is a folder or a file",
        one_of({"auto", "folders", "list"}));
  t.add("--max-per-class", &O::max_per_class, "keep at most N documents of each class, 0: all", between(0, 1 << 30),
        Recorded::Training);
  t.add("--valid-fraction", &O::valid_fraction, "share of each class held out for validation",
        in_range(0, 0.5), Recorded::Training);
  t.add("--test-fraction", &O::test_fraction, "share of each class held out for testing", in_range(0, 0.5),
        Recorded::Training);
  t.add("--eval-split", &O::eval_split, "the split evaluations score", one_of({"valid", "test"}));
  t.add("--folds", &O::folds,
        "K-fold cross-validation: K runs, each evaluated on its held-out fold; reports mean and std (0: off)",
        between(0, 1000));
  t.add("--vocab-size", &O::vocab_size, "SentencePiece pieces, trained on the training split", between(8, 1 << 20),
        Recorded::Model);
  t.add("--max-length", &O::max_length, "tokens of a document the model reads (the rest is cut)",
        between(1, 1 << 20), Recorded::Training);
  t.add("--batch-tokens", &O::batch_tokens, "padded tokens per training batch", between(1, 1 << 30),
        Recorded::Training);
  t.add("--pooling", &O::pooling, "a document's vector: mean over its tokens, or a [CLS] token's output",
        one_of({"mean", "cls"}), Recorded::Model);
  t.add("--layers", &O::layers, "encoder layers", between(1, 1024), Recorded::Model);
  t.add("--heads", &O::heads, "attention heads", between(1, 4096), Recorded::Model);
  t.add("--head-dim", &O::head_dim, "width of each head (model width = heads x head-dim)", between(1, 65536),
        Recorded::Model);
  t.add("--ff", &O::ff, "feed-forward width", between(1, 1 << 20), Recorded::Model);
  t.add("--dropout", &O::dropout, "dropout probability", in_range(0, 1, Bounds::HighOpen), Recorded::Training);
  add_attention_options(t, &O::attention, &O::eval_attention);
  add_clustering_weights(t, &O::mu, &O::nu);
  t.add("--baseline", &O::baseline,
        "none, or bow: multinomial naive Bayes on the same split and tokens instead of a model (no checkpoint)",
        one_of({"none", "bow"}));
  add_train_options(t, &O::train);
  return t;
}

const OptionTable<ClassifyOptions>& table() {
  static const OptionTable<ClassifyOptions> t = make_table();
  return t;
}

using Prepared = data::TokenizedCorpus;

void note(const std::string& line) { std::fprintf(stderr, "classify: %s\n", line.c_str()); }

class ClassifyRun : public InspectableTask {
 public:
  ClassifyRun(const Prepared& p, const ClassifyOptions& o, const Attentions& a, Generator& gen, Device device,
              const dist::World& world)
      : InspectableTask({o.mu, o.nu, train::derived_seed(o.train.seed, 4)}),
        p_(p),
        a_(a),
        device_(device),
        model_(classifier_options(p, o, a), gen),
        sampler_(p.train_sampler(o.batch_tokens, train::derived_seed(o.train.seed, 3), world.rank(), world.size())),
        eval_batches_(p.eval_batches(o.batch_tokens)),
        eval_seed_(train::derived_seed(o.train.seed, 2)) {
    model_.to(device);
  }

  nn::Module& model() override { return model_; }

  train::Step step(Generator& gen) override {
    std::vector<int64_t> docs;
    for (const int64_t r : sampler_.next()) docs.push_back(p_.split.train[size_t(r)]);
    const models::ClassifiedBatch b = models::classify_batch(model_, p_, docs, device_, gen);
    models::ClassificationScores scores(int64_t(p_.classes.size()));
    scores.add(b);
    return {b.out.objective(b.loss), b.loss.item<double>(), {{"acc", scores.confusion().accuracy()}}, double(b.tokens)};
  }

  void use_attention(train::Phase p) override { model_.set_attention(p == train::Phase::Evaluation ? a_.eval : a_.train); }

  train::Evaluation evaluate() override {
    Generator gen(eval_seed_);
    const models::ClassificationScores scores =
        models::evaluate_classification(model_, p_, eval_batches_, device_, gen);
    return {scores.metrics(), double(scores.tokens())};
  }

  nlohmann::json data_state() const override { return sampler_state(sampler_); }
  void load_data_state(const nlohmann::json& state) override { restore_sampler(sampler_, state); }

  std::string cannot_inspect() const override { return models::nothing_to_inspect(a_.train); }

  models::Inspection inspection(int64_t batches, uint64_t seed) override {
    const std::vector<int64_t> docs = first_batches(eval_batches_, batches);
    return models::inspect(
        model_,
        [&](Generator& gen) {
          const models::ClassifiedBatch b = models::classify_batch(model_, p_, docs, device_, gen);
          return models::InspectedPass{{{"encoder", model_.encoder, a_.train, b.out.layers, b.out.lengths}}, b.loss};
        },
        inspection_options(seed));
  }

 private:
  static models::ClassifierOptions classifier_options(const Prepared& p, const ClassifyOptions& o,
                                                      const Attentions& a) {
    return {p.vocabulary, int64_t(p.classes.size()), models::parse_pooling(o.pooling),
            {o.layers, o.heads, o.head_dim, o.ff, o.dropout, a.train, {o.mu, o.nu}}};
  }

  const Prepared& p_;
  Attentions a_;
  Device device_;
  models::Classifier model_;
  data::BatchSampler sampler_;                      // over positions in p_.split.train
  std::vector<std::vector<int64_t>> eval_batches_;  // document indices
  uint64_t eval_seed_;
};

// The corpus read and tokenized, and the Transformer's run on it.
PreparedRun prepare_classify(const ClassifyOptions& o) {
  const data::ClassificationCorpusOptions c = classify_corpus_options(o, vocabulary_paths(o.train));
  const data::ClassifiedDocuments corpus = data::read_classification_corpus(c);
  return classify_transformer_run(o, std::make_shared<const Prepared>(data::tokenize_corpus(corpus, c)));
}

TrainingApp<ClassifyOptions> classify_app() {
  TrainingApp<ClassifyOptions> app;
  app.name = app.task = kTask;  // the task: --eval-only --resume reads the checkpoint's settings
  app.description =
      "Classify long documents (Brown genres, SpamAssassin e-mails, or any folder-per-class or list-file corpus) "
      "with a Transformer or ClusterFormer, or with the naive Bayes floor (--baseline bow). Flags override the "
      "preset's values.";
  app.table = std::make_shared<OptionTable<ClassifyOptions>>(make_table());
  app.check = check_classify_options;
  app.prepare = prepare_classify;
  app.run = run_classify;
  app.inspected = [](ClassifyOptions& o, const CheckpointRequest& request) {
    o.train.resume = request.path;  // its SentencePiece model is beside it
    o.train.progress = false;
  };
  app.unused = [](const ClassifyOptions& o) {
    std::vector<std::pair<std::string, std::string>> unused;
    if (o.baseline == "bow")
      for (const char* flag : {"--attention", "--eval-attention", "--pooling", "--layers", "--heads", "--head-dim", "--ff",
                               "--dropout", "--mu", "--nu", "--batch-tokens", "--optimizer", "--schedule", "--clip",
                               "--param-groups", "--steps", "--eval-every", "--patience", "--save-every",
                               "--inspect-every", "--profile", "--profile-json", "--profile-trace"})
        unused.emplace_back(flag, "--baseline bow fits naive Bayes, no model");
    return unused;
  };
  app.headline = [](const ClassifyOptions& o, const train::Report& r) {
    const std::string model = r.fields.at("model") == "bow" ? std::string("naive Bayes (bag of words)")
                                                            : "step " + std::to_string(r.steps) + ", " +
                                                                  r.fields.at("attention").get<std::string>();
    const std::string split = o.folds > 0 ? std::to_string(o.folds) + "-fold means" : o.eval_split + " split";
    return std::string(kTask) + ": " + o.data + " (" + std::to_string(r.fields.at("classes").get<int64_t>()) +
           " classes), " + split + ", " + model + " (majority class " +
           std::to_string(r.fields.at("majority_accuracy").get<double>()).substr(0, 6) + ")";
  };
  return app;
}

}  // namespace

ClassifyOptions classify_preset(ClassifyPreset preset) {
  ClassifyOptions o;
  if (preset == ClassifyPreset::Smoke) {
    o.vocab_size = 2000, o.max_length = 256, o.batch_tokens = 4096;
    o.layers = 1, o.heads = 2, o.head_dim = 16, o.ff = 64, o.dropout = 0.0;
    o.train.optimizer = optim::OptimizerConfig::parse("adam:lr=3e-3");
    o.train.steps = 150;
    o.train.eval_every = 50;
    o.train.threads = 1;
  }
  return o;
}

Attentions check_classify_options(const ClassifyOptions& o) {
  table().check(o);
  train::check_options(o.train);
  check_model_width(o.heads, o.head_dim);
  const Attentions a = attentions(o.attention, o.eval_attention);
  const int64_t longest = o.max_length + (o.pooling == "cls" ? 1 : 0);
  TP_CHECK(o.batch_tokens >= longest, "--batch-tokens", "must hold one whole document: at least --max-length",
           o.pooling == "cls" ? " + 1 (the [CLS] token)" : "", " = ", longest, ", got ", o.batch_tokens);
  TP_CHECK(o.valid_fraction + o.test_fraction < 1, "--valid-fraction",
           "with --test-fraction leaves no training document: their sum must be below 1");
  if (o.baseline == "bow") {
    TP_CHECK(o.train.save.empty() && o.train.save_best.empty() && o.train.resume.empty(), "--baseline",
             "bow fits naive Bayes and writes no checkpoint: drop --save, --save-best and --resume");
    TP_CHECK(o.train.device == "auto" || o.train.device == "cpu", "--device", "bow fits naive Bayes on the CPU, got '",
             o.train.device, "'");
  }
  TP_CHECK(o.folds != 1, "--folds", "needs at least 2 folds (0: no cross-validation)");
  if (o.folds > 0)
    TP_CHECK(o.train.save.empty() && o.train.save_best.empty() && o.train.resume.empty() && o.train.log.empty() &&
                 o.train.patience == 0 && !train::profile_outputs(o.train).any(),
             "--folds", "trains one model per fold: drop --save, --save-best, --resume, --log, --patience and --profile*");
  return a;
}

data::ClassificationCorpusOptions classify_corpus_options(const ClassifyOptions& o,
                                                          const std::vector<std::string>& spm_paths) {
  return {o.data, data::parse_corpus_layout(o.layout), o.max_per_class, o.valid_fraction, o.test_fraction,
          data::parse_eval_split(o.eval_split), o.vocab_size, o.max_length,
          o.train.resume.empty() ? "" : o.train.resume + ".spm", spm_paths,  // SentencePiece read, written
          {"--data", "--vocab-size", "--eval-split", "--valid-fraction", "--test-fraction"},  // named in errors
          // skipped entries (told by the run that read the corpus first, not by an inspection), left-out
          // documents, progress
          o.train.progress ? note : nullptr, note, o.train.progress ? note : nullptr};
}

nlohmann::json classify_corpus_fields(const Prepared& p, const ClassifyOptions& o) {
  const data::Split& s = p.split;
  return {{"data", o.data}, {"classes", p.classes.size()},
          {"documents", {{"train", s.train.size()}, {"valid", s.valid.size()}, {"test", s.test.size()}}},
          {"eval_split", o.eval_split}, {"majority_accuracy", p.majority_accuracy},
          {"empty_documents", p.empty_documents}, {"skipped_entries", p.skipped_entries},
          {"vocabulary", p.vocabulary}, {"train_tokens", p.train_tokens}, {"max_length", o.max_length}};
}

PreparedRun classify_transformer_run(const ClassifyOptions& o, std::shared_ptr<const Prepared> p) {
  const Attentions a = attentions(o.attention, o.eval_attention);
  train::RunSpec spec;
  spec.identity = table().identity(kTask, o);
  spec.identity.model["classes"] = p->classes;
  if (!o.train.resume.empty()) check_vocabulary(p->vocabulary_fingerprint, o.train.resume + ".spm", o.train.resume);
  record_vocabulary(spec.identity, p->vocabulary_fingerprint, o.train.resume);
  spec.best = {"accuracy", train::Goal::Max};
  spec.log_fields = classify_corpus_fields(*p, o);
  spec.log_fields["model"] = "transformer";
  spec.log_fields["attention"] = a.train.to_string();
  spec.log_fields["eval_attention"] = a.eval.to_string();
  return {spec, [p, o, a](Generator& gen, Device device, const dist::World& world) {
            return std::make_unique<ClassifyRun>(*p, o, a, gen, device, world);
          }};
}

train::Report run_classify(const ClassifyOptions& o) {
  check_clustering_weights(o.mu, o.nu, {check_classify_options(o).train});  // not for the sweep, whose full runs share its µ, ν
  const auto start = std::chrono::steady_clock::now();
  const data::ClassifiedDocuments corpus = data::read_classification_corpus(classify_corpus_options(o));
  if (o.folds > 0) return run_classify_folds(o, corpus);
  return run_classify_prepared(o, data::tokenize_corpus(corpus, classify_corpus_options(o, vocabulary_paths(o.train))),
                               start);
}

InspectedCheckpoint inspect_classify_checkpoint(const CheckpointRequest& request) {
  return inspect_app_checkpoint(classify_app(), request);
}

void add_classify(CommandLine& cli) {
  const TrainingApp<ClassifyOptions> app = classify_app();
  CLI::App* classify = add_training_app(cli, app);

  const auto table = app.table;
  add_classify_sweep(cli, classify, [table] { return table->parsed(); });
}

}  // namespace tapestry::app
