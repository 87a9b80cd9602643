#include "models/naive_bayes.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace tapestry::models {

NaiveBayes::NaiveBayes(int64_t vocabulary, int64_t classes, double alpha)
    : v_(vocabulary), k_(classes), alpha_(alpha) {
  TP_CHECK(vocabulary >= 1 && classes >= 1, "NaiveBayes", "vocabulary and classes must be at least 1, got ",
           vocabulary, " and ", classes);
  TP_CHECK(alpha > 0 && std::isfinite(alpha), "NaiveBayes", "alpha must be positive and finite, got ", alpha);
  documents_.assign(size_t(k_), 0);
  counts_.assign(size_t(k_ * v_), 0);
}

void NaiveBayes::fit(const std::vector<std::vector<int64_t>>& documents, const std::vector<int64_t>& labels) {
  TP_CHECK(documents.size() == labels.size(), "NaiveBayes::fit", documents.size(), " documents but ", labels.size(),
           " labels");
  for (size_t i = 0; i < documents.size(); ++i) {
    const int64_t c = labels[i];
    TP_CHECK(c >= 0 && c < k_, "NaiveBayes::fit", "label ", c, " of document ", i, " is outside [0, ", k_, ")");
    ++documents_[size_t(c)];
    for (const int64_t t : documents[i]) {
      TP_CHECK(t >= 0 && t < v_, "NaiveBayes::fit", "token ", t, " of document ", i, " is outside [0, ", v_, ")");
      ++counts_[size_t(c * v_ + t)];
    }
  }
}

std::vector<double> NaiveBayes::log_posterior(const std::vector<int64_t>& document) const {
  int64_t total = 0;
  for (const int64_t n : documents_) total += n;
  TP_CHECK(total > 0, "NaiveBayes::log_posterior", "the model has seen no training document (call fit first)");
  for (const int64_t t : document)
    TP_CHECK(t >= 0 && t < v_, "NaiveBayes::log_posterior", "token ", t, " is outside [0, ", v_, ")");
  const double minus_inf = -std::numeric_limits<double>::infinity();
  std::vector<double> score(size_t(k_), minus_inf);
  for (int64_t c = 0; c < k_; ++c) {
    if (documents_[size_t(c)] == 0) continue;
    const int64_t* row = counts_.data() + c * v_;
    double tokens = 0;
    for (int64_t t = 0; t < v_; ++t) tokens += double(row[t]);
    const double log_denominator = std::log(tokens + alpha_ * double(v_));
    double s = std::log(double(documents_[size_t(c)]) / double(total));
    for (const int64_t t : document) s += std::log(double(row[t]) + alpha_) - log_denominator;
    score[size_t(c)] = s;
  }
  const double top = *std::max_element(score.begin(), score.end());
  double z = 0;
  for (const double s : score) z += std::exp(s - top);
  const double log_z = top + std::log(z);
  for (double& s : score) s -= log_z;
  return score;
}

int64_t NaiveBayes::predict(const std::vector<int64_t>& document) const {
  const std::vector<double> p = log_posterior(document);
  return int64_t(std::max_element(p.begin(), p.end()) - p.begin());
}

}  // namespace tapestry::models
