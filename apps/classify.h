// `tapestry classify`: long-document classification with a Transformer or a ClusterFormer
// (models/classifier.h), or with the bag-of-words floor (multinomial naive Bayes,
// models/naive_bayes.h), on the harness (train/trainer.h).
//
// Data (--data): `brown` (15 genres, list file), `spam-assassin` (5 groups, folder per class),
// `spam-assassin-2way` (ham: easy-ham-1, easy-ham-2, hard-ham-1; spam: spam-1, spam-2), all prepared
// by `make data` (docs/DATA.md); or a path: a folder per class, or a list file of path<TAB>label
// lines (--layout, by default chosen by whether the path is a folder or a file). Reading, splitting
// and tokenizing are data/classification_corpus.h's; the naive Bayes floor and the scores,
// models/document_classification.h's.
//
// Split: stratified and deterministic, independent of --seed (data/split.h). Within each class the documents are
// ordered by the 64-bit FNV-1a hash of their path relative to the corpus root (ties by the path);
// the first round(n · test_fraction) are test, the next round(n · valid_fraction) valid, the rest
// train (each held-out share is at least one document when its fraction is positive and the class
// has at least 3). --max-per-class keeps the first N of a class in the same order, before the split.
// A document keeps its split when others are added or removed. With --folds K the same order deals
// each class's documents into K folds (position j to fold j mod K); run f trains on the other folds
// and evaluates on fold f (no validation split), and the report gives each fold's metrics, their
// means as the metrics and their sample standard deviations as `<metric>_std`.
//
// Tokens: SentencePiece (--vocab-size pieces) trained on the training split (at most
// data::kSentencePieceTextBytes of its text, documents in hash order); documents are cut to their
// first --max-length tokens. The model file goes beside each checkpoint as `<checkpoint>.spm` (--save,
// --save-best); --resume and --eval-only read `<resume>.spm`, so a checkpoint classifies on its own.
// A run without a checkpoint keeps its SentencePiece model in memory only. A document with no
// tokens is left out and counted ("empty_documents" in the report, and a line on stderr); entries
// the folder reader skips are counted too ("skipped_entries").
//
// Batches: data::BatchSampler under a budget of --batch-tokens padded tokens, shuffled by the seed,
// its position checkpointed, so a resumed run continues with the same batches.
//
// Metrics, on the --eval-split (valid, or test): accuracy (the best checkpoint and --patience follow
// it), macro_f1 (metrics/f1.h) and loss (cross-entropy). The report's fields carry
// majority_accuracy: the accuracy of always answering the training split's most frequent class on
// the same split, the floor every model must clear.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apps/app.h"
#include "apps/inspect.h"
#include "apps/options.h"
#include "data/classification_corpus.h"
#include "train/trainer.h"

namespace tapestry::app {

struct ClassifyOptions {
  std::string data = "brown";      // brown | spam-assassin | spam-assassin-2way | a folder | a list file
  std::string layout = "auto";     // for a path: auto | folders | list
  int64_t max_per_class = 0;       // keep at most N documents of each class (0: all)
  double valid_fraction = 0.1;
  double test_fraction = 0.1;
  std::string eval_split = "valid";  // valid | test
  int64_t folds = 0;               // K-fold cross-validation: K runs on data::stratified_fold (0: the fixed split)
  int64_t vocab_size = 8000;
  int64_t max_length = 2048;       // tokens of a document the model reads
  int64_t batch_tokens = 16384;    // padded tokens per training batch
  std::string pooling = "mean";    // mean | cls
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t head_dim = 32;
  int64_t ff = 256;
  double dropout = 0.1;
  attention::AttentionConfig attention = attention::AttentionConfig::parse("full");
  std::optional<attention::AttentionConfig> eval_attention;
  // neural-clustering only: the weights µ of L1 and ν of L2 (ClusterFormer eq. 17).
  double mu = 1e-3;
  double nu = 1e-3;
  std::string baseline = "none";   // none | bow: multinomial naive Bayes on the same tokens, no training run
  train::TrainOptions train;

  ClassifyOptions() {  // the harness's settings that differ for classification
    train.optimizer = optim::OptimizerConfig::parse("adam:lr=1e-3");
    train.clip = 1.0;
    train.steps = 2000;
    train.eval_every = 200;
  }
};

enum class ClassifyPreset {
  Default,  // N = 2048, 2 layers of 4 × 32, ff 256, Adam 1e-3, 2000 steps
  Smoke,    // a few hundred documents' worth at N = 256: 1 layer of 2 × 16, one thread, 150 steps
};
ClassifyOptions classify_preset(ClassifyPreset preset);

// Returns the attentions the options name; throws Error naming the flag.
Attentions check_classify_options(const ClassifyOptions& options);

// Prepares the data, then trains and evaluates (or, with --eval-only, evaluates; with --baseline bow,
// fits and evaluates naive Bayes). Throws Error for missing data (naming `make data`), unreadable
// documents, a checkpoint of other classes or settings, and what the harness refuses.
train::Report run_classify(const ClassifyOptions& options);

// The steps of run_classify, for the runs of apps/classify_sweep.cpp. The corpus settings of `o`, its
// flags named in errors: SentencePiece read beside --resume, or trained and saved to each of
// `spm_paths`; skipped entries, left-out documents and (with progress) tokenizing on stderr.
data::ClassificationCorpusOptions classify_corpus_options(const ClassifyOptions& o,
                                                          const std::vector<std::string>& spm_paths = {});
// The run of the model `o` describes on the tokenized corpus, which its task factory holds.
PreparedRun classify_transformer_run(const ClassifyOptions& o, std::shared_ptr<const data::TokenizedCorpus> corpus);
// What a report says of the corpus: its source, classes, split sizes, majority-class accuracy, tokens.
nlohmann::json classify_corpus_fields(const data::TokenizedCorpus& corpus, const ClassifyOptions& o);
// Trains (or evaluates; with --baseline bow, fits and scores naive Bayes) on a corpus already prepared
// with `o`'s corpus settings; the report's seconds count from `start`.
train::Report run_classify_prepared(const ClassifyOptions& o, const data::TokenizedCorpus& corpus,
                                    std::chrono::steady_clock::time_point start);
// --folds K (apps/classify_sweep.cpp): K runs, run f trained on every fold but f and evaluated on fold
// f; the report is the last run's, its metrics the folds' means, with each fold's figures and the
// standard deviations.
train::Report run_classify_folds(const ClassifyOptions& o, const data::ClassifiedDocuments& corpus);

// `tapestry inspect` of a classify checkpoint (apps/inspect.h), on the CPU: the first held-out
// batches of its recorded corpus and split, tokenized by the SentencePiece model beside it.
InspectedCheckpoint inspect_classify_checkpoint(const CheckpointRequest& request);

// Several models on one corpus, read, split and tokenized once with `corpus`'s options
// (apps/classify_sweep.cpp). Each of `runs`
// sets its own model and training options (attention, µ, ν, seed, steps); the corpus options (data,
// fractions, vocab_size, max_length, eval_split) are `corpus`'s. The reports come in `runs`' order.
struct SameCorpusRuns {
  int64_t classes = 0;
  int64_t train_tokens = 0;            // an epoch's tokens
  double majority_accuracy = 0;        // on the eval split, of the training split's most frequent class
  std::vector<train::Report> reports;  // one per run
};
SameCorpusRuns run_classify_on_one_corpus(const ClassifyOptions& corpus, const std::vector<ClassifyOptions>& runs);

// `tapestry classify sweep`: the ClusterFormer paper's Table 4 (accuracy, time and memory against the
// number of clusters k, next to full attention) and Table 5 (the clustering losses L1 and L2 each on
// or off) at small scale, on one prepared corpus. Every run takes the classify options, with the
// attention, µ, ν and seed of its row. Peak memory is the run's device allocator's peak (training
// and evaluation); time per epoch is the training split's tokens over the run's tokens per second.
struct SweepOptions {
  std::string grid = "both";  // table4 | table5 | both
  std::vector<int64_t> clusters = {5, 10, 20, 30, 60, 100};  // Table 4's k
  int64_t ablation_clusters = 20;                           // k of the Table 5 runs
  int64_t seeds = 1;                                        // Table 5: seed, seed + 1, ...
  std::string out = "classify-sweep";                       // writes <out>.md and <out>.json
};

// Throws Error naming the flag.
void check_sweep_options(const ClassifyOptions& options, const SweepOptions& sweep);

// Runs the grid, writes <out>.md and <out>.json, and returns the JSON: {data, classes, max_length,
// steps, eval_split, majority_accuracy, device, rows: [{grid, attention, mu, nu, seed, accuracy,
// macro_f1, seconds, seconds_per_epoch, peak_bytes}], markdown}.
nlohmann::json run_classify_sweep(const ClassifyOptions& options, const SweepOptions& sweep);

// Registers `tapestry classify` and `tapestry classify sweep`.
void add_classify(CommandLine& cli);
// Registers `tapestry classify [classify flags] sweep [sweep flags]` under `classify`
// (apps/classify_sweep.cpp); `parsed` gives the classify flags, which set every run's options.
void add_classify_sweep(CommandLine& cli, CLI::App* classify, std::function<ClassifyOptions()> parsed);

}  // namespace tapestry::app
