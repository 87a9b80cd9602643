/// @file
/// The document classifiers on a tokenized corpus (data/classification_corpus.h): a batch of its
/// documents through a Classifier (models/classifier.h), and the scores that it and the naive Bayes
/// floor (models/naive_bayes.h) report on held-out documents, counted alike.
///
///   const ClassificationScores s = evaluate_classification(model, corpus, corpus.eval_batches(4096), device, gen);
///   s.metrics();  // {accuracy, macro_f1, loss}
///
/// Shape letters: B documents, K classes.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/classification_corpus.h"
#include "metrics/f1.h"
#include "models/classifier.h"

namespace tapestry::models {

/// Documents of a tokenized corpus through a Classifier.
struct ClassifiedBatch {
  Classifier::Output out;        ///< the model's output; out.logits (B, K)
  Tensor loss;                   ///< 0-d: the mean cross-entropy over the B documents
  std::vector<int64_t> targets;  ///< (B) their labels
  int64_t tokens = 0;            ///< their pieces
};

/// corpus's `documents` (indices into corpus.tokens, each of at least one piece) as one padded batch
/// (data::make_batch) on `device`, through `model`. Throws Error for an empty `documents` or one
/// outside the corpus.
ClassifiedBatch classify_batch(Classifier& model, const data::TokenizedCorpus& corpus,
                               const std::vector<int64_t>& documents, Device device, Generator& gen);

/// Accuracy, macro-F1 (metrics/f1.h) and the mean cross-entropy over the documents counted.
class ClassificationScores {
 public:
  /// K = classes; throws Error as metrics::ConfusionMatrix does.
  explicit ClassificationScores(int64_t classes) : confusion_(classes) {}

  /// A batch: its argmax predictions, its loss times its documents, its pieces.
  void add(const ClassifiedBatch& batch);
  /// One document: its prediction and target, its cross-entropy −log p(target), its pieces.
  void add(int64_t prediction, int64_t target, double loss, int64_t tokens);

  /// {accuracy, macro_f1, loss}, the loss the mean over the documents (NaN before any add).
  std::vector<std::pair<std::string, double>> metrics() const;
  const metrics::ConfusionMatrix& confusion() const { return confusion_; }  ///< the counts so far
  int64_t tokens() const { return tokens_; }  ///< the pieces counted

 private:
  metrics::ConfusionMatrix confusion_;
  double loss_ = 0;  ///< summed over the documents
  int64_t tokens_ = 0;
};

/// The scores of `model` on corpus's documents in `batches` (document indices, each batch through
/// classify_batch).
ClassificationScores evaluate_classification(Classifier& model, const data::TokenizedCorpus& corpus,
                                             const data::BatchList& batches, Device device, Generator& gen);

/// The bag-of-words floor: NaiveBayes(corpus.vocabulary, K) fitted on corpus.split.train and scored
/// on corpus.held_out() (the most probable class; the loss −log p(target | document)).
ClassificationScores naive_bayes_scores(const data::TokenizedCorpus& corpus);

}  // namespace tapestry::models
