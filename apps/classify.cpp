#include "apps/classify.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include "apps/options.h"
#include "core/creation.h"
#include "core/device.h"
#include "data/batch.h"
#include "data/classification.h"
#include "data/datasets.h"
#include "data/sentencepiece.h"
#include "data/split.h"
#include "metrics/f1.h"
#include "metrics/summary.h"
#include "models/classifier.h"
#include "models/inspection.h"
#include "models/naive_bayes.h"
#include "ops/loss.h"
#include "ops/reduce.h"
#include "ops/shape.h"

namespace tapestry::app {

namespace fs = std::filesystem;

namespace {

constexpr const char* kTask = "classify";
// Documents sorted by length together when batching: enough to pad little, few enough that a
// batch's documents differ from epoch to epoch.
constexpr int64_t kBatchingWindow = 256;

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
  t.add("--mu", &O::mu, "neural-clustering: weight µ of the clustering loss L1", in_range(0, 1e6), Recorded::Training);
  t.add("--nu", &O::nu, "neural-clustering: weight ν of the centroid sorting loss L2", in_range(0, 1e6),
        Recorded::Training);
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

// ---- data ----

using Corpus = data::ClassifiedDocuments;

Corpus read_corpus(const ClassifyOptions& o) {
  const bool two_way = o.data == "spam-assassin-2way";
  if (o.data == "brown") return data::read_class_list(data::dataset_directory("brown") + "/labels.tsv");
  if (o.data == "spam-assassin" || two_way) {
    Corpus corpus = data::read_class_folders(data::dataset_directory("spam-assassin"));
    if (two_way) {
      const std::vector<std::string> groups = corpus.classes;
      corpus.classes = {"ham", "spam"};
      for (data::Document& d : corpus.documents) d.label = groups[size_t(d.label)].rfind("spam", 0) == 0 ? 1 : 0;
    }
    return corpus;
  }
  std::error_code error;
  const fs::file_status status = fs::status(o.data, error);
  TP_CHECK(fs::exists(status), "--data", "'", o.data,
           "' is neither brown, spam-assassin, spam-assassin-2way nor an existing folder or list file");
  const bool folders = o.layout == "folders" || (o.layout == "auto" && fs::is_directory(status));
  return folders ? data::read_class_folders(o.data) : data::read_class_list(o.data);
}

// Each class's documents in the order of their keys' hashes, --max-per-class of each (data/split.h).
std::vector<std::vector<int64_t>> hash_order(const Corpus& corpus, const ClassifyOptions& o) {
  std::vector<int64_t> labels;
  for (const data::Document& d : corpus.documents) labels.push_back(d.label);
  return data::hash_order(data::document_keys(corpus), labels, int64_t(corpus.classes.size()), o.max_per_class);
}

data::SentencePiece train_sentencepiece(const Corpus& corpus, const data::Split& split, const ClassifyOptions& o) {
  data::SentencePieceOptions spm;
  spm.vocab_size = o.vocab_size;
  // E-mails carry stray bytes and rare symbols: the rarest characters become <unk>.
  spm.character_coverage = 0.9995;
  try {
    return data::SentencePiece::train_sentences(data::sample_lines(corpus, split.train, kSentencePieceTextBytes), spm);
  } catch (const Error& e) {
    fail("--vocab-size", "SentencePiece could not train ", o.vocab_size, " pieces on the training split (",
         split.train.size(), " documents); a smaller --vocab-size may fit: ", e.what());
  }
}

// What every run of the app works on: the tokenized splits.
struct Prepared {
  std::vector<std::string> classes;
  std::vector<std::vector<int64_t>> tokens;  // per document, cut to max_length
  std::vector<int64_t> labels;               // per document
  data::Split split;                         // without the empty documents
  int64_t vocabulary = 0;
  int64_t empty_documents = 0;
  int64_t skipped_entries = 0;
  int64_t train_tokens = 0;                  // an epoch's tokens
  double majority_accuracy = 0;              // on the eval split, of the training split's most frequent class

  const std::vector<int64_t>& eval(const std::string& name) const { return name == "test" ? split.test : split.valid; }
};

// Reads the corpus, reporting what the folder reader skipped.
Corpus read_reported_corpus(const ClassifyOptions& o) {
  Corpus corpus = read_corpus(o);
  for (const std::string& s : corpus.skipped)
    if (s.find(": hidden") == std::string::npos) std::fprintf(stderr, "classify: skipped %s\n", s.c_str());
  return corpus;
}

// Tokenizes the corpus for one split (SentencePiece trained on its training documents, or read
// beside --resume), saving the SentencePiece model to each of `spm_paths`.
Prepared prepare(const ClassifyOptions& o, const Corpus& corpus, const data::Split& split,
                 const std::vector<std::string>& spm_paths) {
  Prepared p;
  p.classes = corpus.classes;
  p.skipped_entries = int64_t(corpus.skipped.size());
  TP_CHECK(!split.train.empty(), "--data", "'", o.data, "' leaves no training document");

  const auto start = std::chrono::steady_clock::now();
  const data::SentencePiece sp = !o.train.resume.empty() ? data::SentencePiece::load(o.train.resume + ".spm")
                                                         : train_sentencepiece(corpus, split, o);
  for (const std::string& path : spm_paths) sp.save(path);
  p.vocabulary = sp.vocab_size();

  data::EncodedDocuments encoded = data::encode_documents(sp, corpus, split, o.max_length);
  p.tokens = std::move(encoded.tokens);
  p.split = std::move(encoded.split);
  for (const data::Document& d : corpus.documents) p.labels.push_back(d.label);
  p.empty_documents = int64_t(encoded.empty.size());
  if (!encoded.empty.empty())
    std::fprintf(stderr, "classify: left out %zu document(s) with no tokens, e.g. %s\n", encoded.empty.size(),
                 encoded.empty.front().c_str());
  TP_CHECK(!p.split.train.empty(), "--data", "'", o.data, "' has no training document with a token");
  TP_CHECK(!p.eval(o.eval_split).empty(), "--eval-split", "the ", o.eval_split, " split of '", o.data,
           "' is empty (raise --", o.eval_split, "-fraction, or use more documents)");

  if (o.train.progress)
    std::fprintf(stderr, "classify: %zu / %zu / %zu documents (train / valid / test), %lld pieces, tokenized in %.1f s\n",
                 p.split.train.size(), p.split.valid.size(), p.split.test.size(), (long long)p.vocabulary,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());

  std::vector<int64_t> counts(p.classes.size(), 0);
  for (const int64_t i : p.split.train) {
    ++counts[size_t(p.labels[size_t(i)])];
    p.train_tokens += int64_t(p.tokens[size_t(i)].size());
  }
  const int64_t majority = int64_t(std::max_element(counts.begin(), counts.end()) - counts.begin());
  int64_t hits = 0;
  for (const int64_t i : p.eval(o.eval_split)) hits += p.labels[size_t(i)] == majority;
  p.majority_accuracy = double(hits) / double(p.eval(o.eval_split).size());
  return p;
}

// ---- the model's run ----

class ClassifyRun : public InspectableTask {
 public:
  ClassifyRun(const Prepared& p, const ClassifyOptions& o, const Attentions& a, Generator& gen, Device device,
              const dist::World& world)
      : InspectableTask({o.mu, o.nu, train::derived_seed(o.train.seed, 4)}),
        p_(p),
        a_(a),
        device_(device),
        model_(classifier_options(p, o, a), gen),
        sampler_(lengths(p.split.train), batching(o, data::Shuffle::Yes), train::derived_seed(o.train.seed, 3),
                 world.rank(), world.size()),
        eval_seed_(train::derived_seed(o.train.seed, 2)) {
    model_.to(device);
    const std::vector<int64_t>& held_out = p.eval(o.eval_split);
    for (const auto& rows : data::bucket_batches(lengths(held_out), batching(o, data::Shuffle::No))) {
      std::vector<int64_t> docs;
      for (const int64_t r : rows) docs.push_back(held_out[size_t(r)]);
      eval_batches_.push_back(std::move(docs));
    }
  }

  nn::Module& model() override { return model_; }

  train::Step step(Generator& gen) override {
    std::vector<int64_t> docs;
    for (const int64_t r : sampler_.next()) docs.push_back(p_.split.train[size_t(r)]);
    const Forward f = forward(docs, gen);
    metrics::ConfusionMatrix cm(int64_t(p_.classes.size()));
    cm.add(argmax(f.out.logits.detach(), -1).to_vector<int64_t>(), f.targets);
    return {f.out.objective(f.loss), f.loss.item<double>(), {{"acc", cm.accuracy()}}, double(f.tokens)};
  }

  train::Evaluation evaluate() override {
    model_.set_attention(a_.eval);
    Generator gen(eval_seed_);
    metrics::ConfusionMatrix cm(int64_t(p_.classes.size()));
    double loss = 0;
    int64_t tokens = 0;
    for (const auto& docs : eval_batches_) {
      const Forward f = forward(docs, gen);
      loss += f.loss.item<double>() * double(docs.size());
      tokens += f.tokens;
      cm.add(argmax(f.out.logits, -1).to_vector<int64_t>(), f.targets);
    }
    model_.set_attention(a_.train);
    return {{{"accuracy", cm.accuracy()}, {"macro_f1", cm.macro_f1()}, {"loss", loss / double(cm.total())}},
            double(tokens)};
  }

  nlohmann::json data_state() const override { return sampler_state(sampler_); }
  void load_data_state(const nlohmann::json& state) override { restore_sampler(sampler_, state); }

  std::string cannot_inspect() const override { return models::nothing_to_inspect(a_.train); }

  models::Inspection inspection(int64_t batches, uint64_t seed) override {
    const std::vector<int64_t> docs = first_batches(eval_batches_, batches);
    return models::inspect(
        model_,
        [&](Generator& gen) {
          const Forward f = forward(docs, gen);
          return models::InspectedPass{{{"encoder", model_.encoder, a_.train, f.out.layers, f.out.lengths}}, f.loss};
        },
        inspection_options(seed));
  }

 private:
  struct Forward {
    models::Classifier::Output out;
    Tensor loss;
    std::vector<int64_t> targets;
    int64_t tokens = 0;
  };

  Forward forward(const std::vector<int64_t>& docs, Generator& gen) {
    const data::Batch batch = data::make_batch(p_.tokens, docs);
    Forward f;
    for (const int64_t i : docs) {
      f.targets.push_back(p_.labels[size_t(i)]);
      f.tokens += int64_t(p_.tokens[size_t(i)].size());
    }
    f.out = model_.forward(to(batch.tokens, device_), to(batch.lengths, device_), gen);
    f.loss = cross_entropy(f.out.logits, from_vector(f.targets, {int64_t(docs.size())}, device_));
    return f;
  }

  std::vector<int64_t> lengths(const std::vector<int64_t>& docs) const {
    std::vector<int64_t> out;
    for (const int64_t i : docs) out.push_back(int64_t(p_.tokens[size_t(i)].size()));
    return out;
  }

  static data::BatchingOptions batching(const ClassifyOptions& o, data::Shuffle shuffle) {
    data::BatchingOptions b;
    b.max_tokens = o.batch_tokens;
    b.window = kBatchingWindow;
    b.shuffle = shuffle;
    return b;
  }

  static models::ClassifierOptions classifier_options(const Prepared& p, const ClassifyOptions& o,
                                                      const Attentions& a) {
    models::ClassifierOptions m;
    m.vocabulary = p.vocabulary;
    m.classes = int64_t(p.classes.size());
    m.encoder = {o.layers, o.heads, o.head_dim, o.ff, o.dropout, a.train, {o.mu, o.nu}};
    m.pooling = models::parse_pooling(o.pooling);
    return m;
  }

  const Prepared& p_;
  Attentions a_;
  Device device_;
  models::Classifier model_;
  data::BatchSampler sampler_;             // over positions in p_.split.train
  std::vector<std::vector<int64_t>> eval_batches_;  // document indices
  uint64_t eval_seed_;
};

nlohmann::json fields(const Prepared& p, const ClassifyOptions& o) {
  return {{"data", o.data},
          {"classes", p.classes.size()},
          {"documents", {{"train", p.split.train.size()}, {"valid", p.split.valid.size()}, {"test", p.split.test.size()}}},
          {"eval_split", o.eval_split},
          {"majority_accuracy", p.majority_accuracy},
          {"empty_documents", p.empty_documents},
          {"skipped_entries", p.skipped_entries},
          {"vocabulary", p.vocabulary},
          {"train_tokens", p.train_tokens},
          {"max_length", o.max_length}};
}

// --baseline bow: naive Bayes fitted on the training split, scored on the eval split.
train::Report run_baseline(const ClassifyOptions& o, const Prepared& p, std::chrono::steady_clock::time_point start) {
  models::NaiveBayes nb(p.vocabulary, int64_t(p.classes.size()));
  std::vector<std::vector<int64_t>> documents;
  std::vector<int64_t> labels;
  for (const int64_t i : p.split.train) documents.push_back(p.tokens[size_t(i)]), labels.push_back(p.labels[size_t(i)]);
  nb.fit(documents, labels);
  metrics::ConfusionMatrix cm(int64_t(p.classes.size()));
  double loss = 0, tokens = 0;
  for (const int64_t i : p.eval(o.eval_split)) {
    const std::vector<double> lp = nb.log_posterior(p.tokens[size_t(i)]);
    cm.add(int64_t(std::max_element(lp.begin(), lp.end()) - lp.begin()), p.labels[size_t(i)]);
    loss -= lp[size_t(p.labels[size_t(i)])];
    tokens += double(p.tokens[size_t(i)].size());
  }
  train::Report r;
  r.task = kTask;
  r.fields = fields(p, o);
  r.fields["model"] = "bow";
  r.metrics = {{"accuracy", cm.accuracy()}, {"macro_f1", cm.macro_f1()}, {"loss", loss / double(cm.total())}};
  r.best_metric = "accuracy";
  r.best = cm.accuracy();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.items_per_second = tokens / std::max(r.seconds, 1e-9);
  r.device = "cpu";
  r.seed = o.train.seed;
  r.parameters = p.vocabulary * int64_t(p.classes.size());
  return r;
}

}  // namespace

ClassifyOptions::ClassifyOptions() {
  train.optimizer = "adam:lr=1e-3";
  train.clip = 1.0;
  train.steps = 2000;
  train.eval_every = 200;
}

ClassifyOptions classify_preset(ClassifyPreset preset) {
  ClassifyOptions o;
  if (preset == ClassifyPreset::Smoke) {
    o.vocab_size = 2000;
    o.max_length = 256;
    o.batch_tokens = 4096;
    o.layers = 1;
    o.heads = 2;
    o.head_dim = 16;
    o.ff = 64;
    o.dropout = 0.0;
    o.train.optimizer = "adam:lr=3e-3";
    o.train.steps = 150;
    o.train.eval_every = 50;
    o.train.threads = 1;
  }
  return o;
}

void check_classify_options(const ClassifyOptions& o) {
  table().check(o);
  train::check_options(o.train);
  attentions(o.attention, o.eval_attention);
  const int64_t longest = o.max_length + (o.pooling == "cls" ? 1 : 0);
  TP_CHECK(o.batch_tokens >= longest, "--batch-tokens", "must hold one whole document: at least --max-length",
           o.pooling == "cls" ? " + 1 (the [CLS] token)" : "", " = ", longest, ", got ", o.batch_tokens);
  TP_CHECK(o.valid_fraction + o.test_fraction < 1, "--valid-fraction",
           "with --test-fraction leaves no training document: their sum must be below 1");
  if (o.baseline == "bow")
    TP_CHECK(o.train.save.empty() && o.train.save_best.empty() && o.train.resume.empty(), "--baseline",
             "bow fits naive Bayes and writes no checkpoint: drop --save, --save-best and --resume");
  TP_CHECK(o.folds != 1, "--folds", "needs at least 2 folds (0: no cross-validation)");
  if (o.folds > 0)
    TP_CHECK(o.train.save.empty() && o.train.save_best.empty() && o.train.resume.empty() && o.train.log.empty() &&
                 o.train.patience == 0,
             "--folds", "trains one model per fold: drop --save, --save-best, --resume, --log and --patience");
}

namespace {

// Trains (or evaluates) on data already prepared.
train::Report run_prepared(const ClassifyOptions& o, const Prepared& p, std::chrono::steady_clock::time_point start) {
  if (o.baseline == "bow") return run_baseline(o, p, start);
  const Attentions a = attentions(o.attention, o.eval_attention);
  train::RunSpec spec;
  spec.identity = table().identity(kTask, o);
  spec.identity.model["classes"] = p.classes;
  spec.best = {"accuracy", train::Goal::Max};
  spec.log_fields = fields(p, o);
  spec.log_fields["model"] = "transformer";
  spec.log_fields["attention"] = a.train.to_string();
  spec.log_fields["eval_attention"] = a.eval.to_string();
  train::Trainer trainer(spec, o.train);
  return trainer.run(
      [&](Generator& gen, Device device) { return std::make_unique<ClassifyRun>(p, o, a, gen, device, trainer.world()); });
}

// The corpus split by --valid-fraction and --test-fraction.
data::Split fixed_split(const Corpus& corpus, const ClassifyOptions& o) {
  return data::stratified_split(hash_order(corpus, o), o.valid_fraction, o.test_fraction);
}

// --folds K: K runs, run f trained on every fold but f and evaluated on fold f; the report is the
// last run's, its metrics the folds' means, with each fold's figures and the standard deviations.
train::Report run_folds(const ClassifyOptions& o, const Corpus& corpus) {
  const auto start = std::chrono::steady_clock::now();
  const auto by_class = hash_order(corpus, o);
  nlohmann::json folds = nlohmann::json::array();
  std::map<std::string, std::vector<double>> values;
  train::Report report;
  for (int64_t f = 0; f < o.folds; ++f) {
    ClassifyOptions fold = o;
    fold.eval_split = "test";
    const Prepared p = prepare(fold, corpus, data::stratified_fold(by_class, o.folds, f), {});
    report = run_prepared(fold, p, std::chrono::steady_clock::now());
    nlohmann::json row = {{"fold", f}, {"documents", p.split.train.size() + p.split.test.size()},
                          {"test_documents", p.split.test.size()}, {"majority_accuracy", p.majority_accuracy}};
    values["majority_accuracy"].push_back(p.majority_accuracy);
    for (const auto& [name, value] : report.metrics) {
      row[name] = value;
      values[name].push_back(value);
    }
    folds.push_back(row);
    if (o.train.progress)
      std::fprintf(stderr, "classify: fold %lld of %lld: %s\n", (long long)f + 1, (long long)o.folds,
                   report.metrics_text().c_str());
  }
  for (auto& [name, value] : report.metrics) {
    const metrics::Summary s = metrics::summarize(values.at(name));
    value = s.mean;
    report.fields[name + "_std"] = s.std;
  }
  report.fields["majority_accuracy"] = metrics::summarize(values.at("majority_accuracy")).mean;
  report.fields["folds"] = folds;
  report.fields.erase("documents");
  report.best = report.metric("accuracy");
  report.best_step = report.steps;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace

InspectedCheckpoint inspect_classify_checkpoint(const CheckpointRequest& request) {
  ClassifyOptions o;
  table().apply(o, recorded_settings(request.path, kTask, request.flag));
  o.train.resume = request.path;  // its SentencePiece model is beside it
  o.train.progress = false;
  check_classify_options(o);
  const Corpus corpus = read_corpus(o);
  const Prepared p = prepare(o, corpus, fixed_split(corpus, o), {});
  Generator gen(o.train.seed);
  ClassifyRun run(p, o, attentions(o.attention, o.eval_attention), gen, Device::cpu(), dist::World());
  return inspect_restored(run, request, table().identity(kTask, o));
}

train::Report run_classify(const ClassifyOptions& o) {
  check_classify_options(o);
  const auto start = std::chrono::steady_clock::now();
  const Corpus corpus = read_reported_corpus(o);
  if (o.folds > 0) return run_folds(o, corpus);
  std::vector<std::string> spm_paths;
  for (const std::string& checkpoint : {o.train.save, o.train.save_best})
    if (!checkpoint.empty() && checkpoint != o.train.resume) spm_paths.push_back(checkpoint + ".spm");
  return run_prepared(o, prepare(o, corpus, fixed_split(corpus, o), spm_paths), start);
}

SameCorpusRuns run_classify_on_one_corpus(const ClassifyOptions& corpus_options,
                                          const std::vector<ClassifyOptions>& runs) {
  check_classify_options(corpus_options);
  for (const ClassifyOptions& o : runs) check_classify_options(o);
  const Corpus corpus = read_reported_corpus(corpus_options);
  const Prepared p = prepare(corpus_options, corpus, fixed_split(corpus, corpus_options), {});
  SameCorpusRuns out;
  out.classes = int64_t(p.classes.size());
  out.train_tokens = p.train_tokens;
  out.majority_accuracy = p.majority_accuracy;
  for (const ClassifyOptions& o : runs) out.reports.push_back(run_prepared(o, p, std::chrono::steady_clock::now()));
  return out;
}

void add_classify(CommandLine& cli) {
  TrainingApp<ClassifyOptions> app;
  app.name = kTask;
  app.description =
      "Classify long documents (Brown genres, SpamAssassin e-mails, or any folder-per-class or list-file corpus) "
      "with a Transformer or ClusterFormer, or with the naive Bayes floor (--baseline bow). Flags override the "
      "preset's values.";
  app.table = std::make_shared<OptionTable<ClassifyOptions>>(make_table());
  app.check = check_classify_options;
  app.run = run_classify;
  app.headline = [](const ClassifyOptions& o, const train::Report& r) {
    const std::string model = r.fields.at("model") == "bow" ? std::string("naive Bayes (bag of words)")
                                                            : "step " + std::to_string(r.steps) + ", " +
                                                                  r.fields.at("attention").get<std::string>();
    const std::string split = o.folds > 0 ? std::to_string(o.folds) + "-fold means" : o.eval_split + " split";
    return std::string(kTask) + ": " + o.data + " (" + std::to_string(r.fields.at("classes").get<int64_t>()) +
           " classes), " + split + ", " + model + " (majority class " +
           std::to_string(r.fields.at("majority_accuracy").get<double>()).substr(0, 6) + ")";
  };
  CLI::App* classify = add_training_app(cli, app);

  const auto table = app.table;
  add_classify_sweep(cli, classify, [table] { return table->parsed(); });
}

}  // namespace tapestry::app
