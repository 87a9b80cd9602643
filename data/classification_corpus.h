/// @file
/// A classification corpus from its name or path to tokenized splits: the pipeline `tapestry
/// classify` runs before any model sees a document (docs/DATA.md).
///
///   ClassificationCorpusOptions o;
///   o.data = "spam-assassin-2way";                         // or brown, spam-assassin, a path
///   const ClassifiedDocuments corpus = read_classification_corpus(o);
///   const TokenizedCorpus t = tokenize_corpus(corpus, o);  // the split of o's fractions
///   tokenize_corpus(corpus, o, stratified_fold(hash_order(corpus, 0), 5, f));  // or one of your own
///   t.held_out();         // the documents evaluations score (o.eval_split)
///   t.majority_accuracy;  // the floor: always the training split's most frequent class
///
/// Reading: `brown` (list file), `spam-assassin` (5 groups, folder per class), `spam-assassin-2way`
/// (its groups as ham / spam by name), prepared by `make data`; or a path (`layout`). Splitting: each
/// class in the hash order of data/split.h, so that no split depends on a seed. Tokens: SentencePiece
/// trained on the training split (at most kSentencePieceTextBytes of its text, in hash order), or read
/// from a model file; each document cut to its first max_length pieces, and one of no piece left out.
///
/// Nothing here prints: what a user should hear comes through the options' callbacks. Errors name the
/// setting to change as `names` spells it (a command line passes its flags).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/classification.h"
#include "data/split.h"

namespace tapestry::data {

/// The most text SentencePiece trains on (it is the slowest part of preparing a large corpus).
inline constexpr int64_t kSentencePieceTextBytes = int64_t{8} << 20;

/// How a corpus given by its path is laid out (data/classification.h).
enum class CorpusLayout {
  Auto,     ///< a folder per class when the path is a folder, else a list file
  Folders,  ///< read_class_folders
  List      ///< read_class_list
};
/// "auto", "folders" or "list"; throws Error naming the text otherwise.
CorpusLayout parse_corpus_layout(const std::string& name);

/// The held-out split that evaluations score.
enum class EvalSplit {
  Valid,  ///< the validation split
  Test    ///< the test split
};
/// "valid" or "test"; throws Error naming the text otherwise.
EvalSplit parse_eval_split(const std::string& name);
/// "valid" or "test" (what parse_eval_split reads).
std::string to_string(EvalSplit split);

/// What errors call the settings of ClassificationCorpusOptions: a command line passes its flags
/// (`{"--data", "--vocab-size", ...}`), so that a message names what the user set.
struct CorpusSettingNames {
  std::string data = "data";                      ///< names ClassificationCorpusOptions::data
  std::string vocab_size = "vocab_size";          ///< names vocab_size
  std::string eval_split = "eval_split";          ///< names eval_split
  std::string valid_fraction = "valid_fraction";  ///< names valid_fraction
  std::string test_fraction = "test_fraction";    ///< names test_fraction
};

/// The settings of the pipeline.
struct ClassificationCorpusOptions {
  std::string data = "brown";  ///< brown | spam-assassin | spam-assassin-2way | a folder | a list file
  CorpusLayout layout = CorpusLayout::Auto;  ///< for a path
  int64_t max_per_class = 0;   ///< keep the first N documents of each class in hash order (0: all)
  double valid_fraction = 0.1;  ///< each class's share held out for validation (split_corpus)
  double test_fraction = 0.1;   ///< each class's share held out for testing (split_corpus)
  EvalSplit eval_split = EvalSplit::Valid;  ///< TokenizedCorpus::held_out
  int64_t vocab_size = 8000;    ///< SentencePiece pieces, when one is trained
  int64_t max_length = 2048;    ///< pieces of a document kept
  std::string sentencepiece;    ///< a model file to read instead of training one (empty: train)
  std::vector<std::string> save_sentencepiece;  ///< files to write the model to
  CorpusSettingNames names;     ///< what errors call the settings above
  /// Told, as one line, of each entry the folder reader skipped other than a hidden one
  /// ("skipped <path>: <why>"); unset: not told.
  std::function<void(const std::string&)> on_skipped;
  /// Told, as one line without a newline, of the documents left out for having no piece; unset: not told.
  std::function<void(const std::string&)> on_left_out;
  /// Told, as one line, of the splits' sizes, the vocabulary and the time tokenizing took; unset: not told.
  std::function<void(const std::string&)> on_progress;
};

/// The corpus `options.data` names, read by data/classification.h (its `skipped` lists what the folder
/// reader left out; options.on_skipped hears of it). `spam-assassin-2way` has the classes {ham, spam}:
/// a group is spam when its name starts with "spam". Throws Error naming `names.data` when data is neither a set's name nor an
/// existing path, Error naming `make data` when the set is not prepared, and the readers' errors.
ClassifiedDocuments read_classification_corpus(const ClassificationCorpusOptions& options);

/// Each class's documents (indices into corpus.documents) in the hash order of their keys
/// (document_keys, data::hash_order), the first `max_per_class` of each (0: all).
std::vector<std::vector<int64_t>> hash_order(const ClassifiedDocuments& corpus, int64_t max_per_class);

/// The train / valid / test split of options.valid_fraction and options.test_fraction over
/// hash_order(corpus, options.max_per_class) (data::stratified_split).
Split split_corpus(const ClassifiedDocuments& corpus, const ClassificationCorpusOptions& options);

/// What a classifier works on: every document's pieces and label, and the split without the documents
/// of no piece.
struct TokenizedCorpus {
  std::vector<std::string> classes;          ///< the corpus's
  std::vector<std::vector<int64_t>> tokens;  ///< per document, at most max_length (empty outside the split)
  std::vector<int64_t> labels;               ///< per document
  Split split;                               ///< the split given, without the empty documents
  EvalSplit eval_split = EvalSplit::Valid;   ///< the one held_out() returns
  int64_t vocabulary = 0;                    ///< the SentencePiece model's pieces
  std::string vocabulary_fingerprint;        ///< the SentencePiece model's SentencePiece::fingerprint()
  int64_t empty_documents = 0;               ///< documents of no piece, left out
  int64_t skipped_entries = 0;               ///< entries the reader skipped (ClassifiedDocuments::skipped)
  int64_t train_tokens = 0;                  ///< the training split's pieces: an epoch's tokens
  /// On the held-out split: the accuracy of always answering the training split's most frequent class
  /// (the lowest index among ties), the floor every model must clear.
  double majority_accuracy = 0;

  /// The documents evaluations score: split.valid or split.test, as eval_split says.
  const std::vector<int64_t>& held_out() const { return eval_split == EvalSplit::Test ? split.test : split.valid; }
  /// The pieces of each of `documents`.
  std::vector<int64_t> lengths(const std::vector<int64_t>& documents) const;
  /// `documents` in batches of `batching` (data::bucket_batches over their lengths, seed 0, epoch 0),
  /// each batch as document indices.
  BatchList batches(const std::vector<int64_t>& documents, const BatchingOptions& batching) const;
  /// The sampler of the training batches for rank `rank` of `ranks` (data/batch.h), its rows
  /// positions in split.train: shuffled, at most `batch_tokens` padded tokens each, documents sorted
  /// by length in windows of 256 (enough to pad little, few enough that a batch's documents differ
  /// from epoch to epoch).
  BatchSampler train_sampler(int64_t batch_tokens, uint64_t seed, int64_t rank, int64_t ranks) const;
  /// The held-out documents in batches (document indices), batched as train_sampler's but in order.
  BatchList eval_batches(int64_t batch_tokens) const;
};

/// Tokenizes `corpus` for `split` (none: split_corpus(corpus, options)): SentencePiece read from
/// options.sentencepiece, or trained on the split's training documents, then written to each of
/// options.save_sentencepiece. Throws Error naming
/// `names.data` when the split has no training document (before or after leaving out the documents of
/// no piece), `names.vocab_size` when SentencePiece cannot train vocab_size pieces on the training
/// text, and `names.eval_split` (with the fraction to raise) when the held-out split is empty.
TokenizedCorpus tokenize_corpus(const ClassifiedDocuments& corpus, const ClassificationCorpusOptions& options,
                                const std::optional<Split>& split = std::nullopt);

}  // namespace tapestry::data
