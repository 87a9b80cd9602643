#include "models/document_classification.h"

#include <algorithm>

#include "core/creation.h"
#include "data/batch.h"
#include "models/naive_bayes.h"
#include "ops/loss.h"
#include "ops/reduce.h"
#include "ops/shape.h"

namespace tapestry::models {

ClassifiedBatch classify_batch(Classifier& model, const data::TokenizedCorpus& corpus,
                               const std::vector<int64_t>& documents, Device device, Generator& gen) {
  const data::Batch batch = data::make_batch(corpus.tokens, documents);
  ClassifiedBatch b;
  for (const int64_t i : documents) {
    b.targets.push_back(corpus.labels[size_t(i)]);
    b.tokens += int64_t(corpus.tokens[size_t(i)].size());
  }
  b.out = model.forward(to(batch.tokens, device), to(batch.lengths, device), gen);
  b.loss = cross_entropy(b.out.logits, from_vector(b.targets, {int64_t(documents.size())}, device));
  return b;
}

void ClassificationScores::add(const ClassifiedBatch& batch) {
  loss_ += batch.loss.item<double>() * double(batch.targets.size());
  tokens_ += batch.tokens;
  confusion_.add(argmax(batch.out.logits.detach(), -1).to_vector<int64_t>(), batch.targets);
}

void ClassificationScores::add(int64_t prediction, int64_t target, double loss, int64_t tokens) {
  confusion_.add(prediction, target);
  loss_ += loss;
  tokens_ += tokens;
}

ClassificationScores evaluate_classification(Classifier& model, const data::TokenizedCorpus& corpus,
                                             const data::BatchList& batches, Device device, Generator& gen) {
  ClassificationScores scores(int64_t(corpus.classes.size()));
  for (const std::vector<int64_t>& docs : batches) scores.add(classify_batch(model, corpus, docs, device, gen));
  return scores;
}

std::vector<std::pair<std::string, double>> ClassificationScores::metrics() const {
  return {{"accuracy", confusion_.accuracy()},
          {"macro_f1", confusion_.macro_f1()},
          {"loss", loss_ / double(confusion_.total())}};
}

ClassificationScores naive_bayes_scores(const data::TokenizedCorpus& corpus) {
  NaiveBayes nb(corpus.vocabulary, int64_t(corpus.classes.size()));
  std::vector<std::vector<int64_t>> documents;
  std::vector<int64_t> labels;
  for (const int64_t i : corpus.split.train) {
    documents.push_back(corpus.tokens[size_t(i)]);
    labels.push_back(corpus.labels[size_t(i)]);
  }
  nb.fit(documents, labels);
  ClassificationScores scores(int64_t(corpus.classes.size()));
  for (const int64_t i : corpus.held_out()) {
    const std::vector<double> lp = nb.log_posterior(corpus.tokens[size_t(i)]);
    const int64_t target = corpus.labels[size_t(i)];
    scores.add(int64_t(std::max_element(lp.begin(), lp.end()) - lp.begin()), target, -lp[size_t(target)],
               int64_t(corpus.tokens[size_t(i)].size()));
  }
  return scores;
}

}  // namespace tapestry::models
