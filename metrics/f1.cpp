#include "metrics/f1.h"

#include "core/error.h"

namespace tapestry::metrics {

ConfusionMatrix::ConfusionMatrix(int64_t num_classes) : k_(num_classes) {
  TP_CHECK(num_classes >= 1 && num_classes <= kMaxClasses, "ConfusionMatrix", "num_classes must be in 1..",
           kMaxClasses, " (the matrix holds K² counts), got ", num_classes);
  counts_.assign(size_t(k_ * k_), 0);
}

void ConfusionMatrix::check_class(const char* op, const char* what, int64_t c) const {
  TP_CHECK(c >= 0 && c < k_, op, what, " ", c, " is outside the ", k_, " classes 0..", k_ - 1);
}

void ConfusionMatrix::add(int64_t prediction, int64_t target) {
  check_class("ConfusionMatrix::add", "prediction", prediction);
  check_class("ConfusionMatrix::add", "target", target);
  ++counts_[size_t(target * k_ + prediction)];
  ++total_;
}

void ConfusionMatrix::add(const std::vector<int64_t>& predictions, const std::vector<int64_t>& targets) {
  TP_CHECK(predictions.size() == targets.size(), "ConfusionMatrix::add", predictions.size(),
           " predictions but ", targets.size(), " targets");
  // Validate everything first so that a bad entry leaves the matrix unchanged.
  for (size_t i = 0; i < predictions.size(); ++i) {
    check_class("ConfusionMatrix::add", "prediction", predictions[i]);
    check_class("ConfusionMatrix::add", "target", targets[i]);
  }
  for (size_t i = 0; i < predictions.size(); ++i) add(predictions[i], targets[i]);
}

void ConfusionMatrix::merge(const ConfusionMatrix& other) {
  TP_CHECK(other.k_ == k_, "ConfusionMatrix::merge", "cannot merge a matrix of ", other.k_,
           " classes into one of ", k_);
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  total_ += other.total_;
}

int64_t ConfusionMatrix::count(int64_t target, int64_t prediction) const {
  check_class("ConfusionMatrix::count", "target", target);
  check_class("ConfusionMatrix::count", "prediction", prediction);
  return counts_[size_t(target * k_ + prediction)];
}

int64_t ConfusionMatrix::support(int64_t c) const {
  check_class("ConfusionMatrix::support", "class", c);
  int64_t sum = 0;
  for (int64_t p = 0; p < k_; ++p) sum += counts_[size_t(c * k_ + p)];
  return sum;
}

int64_t ConfusionMatrix::predicted(int64_t c) const {
  check_class("ConfusionMatrix::predicted", "class", c);
  int64_t sum = 0;
  for (int64_t t = 0; t < k_; ++t) sum += counts_[size_t(t * k_ + c)];
  return sum;
}

// precision_c = TP_c / (TP_c + FP_c), 0 when the denominator is 0
double ConfusionMatrix::precision(int64_t c) const {
  check_class("ConfusionMatrix::precision", "class", c);
  const int64_t p = predicted(c);
  return p == 0 ? 0.0 : double(count(c, c)) / double(p);
}

// recall_c = TP_c / (TP_c + FN_c), 0 when the denominator is 0
double ConfusionMatrix::recall(int64_t c) const {
  check_class("ConfusionMatrix::recall", "class", c);
  const int64_t s = support(c);
  return s == 0 ? 0.0 : double(count(c, c)) / double(s);
}

// F1_c = 2·TP_c / (2·TP_c + FP_c + FN_c) = 2·TP_c / (predicted_c + support_c), 0 when TP_c = 0
double ConfusionMatrix::f1(int64_t c) const {
  check_class("ConfusionMatrix::f1", "class", c);
  const int64_t tp = count(c, c);
  return tp == 0 ? 0.0 : 2.0 * double(tp) / double(predicted(c) + support(c));
}

// macro-F1 = (1/|O|) Σ_{c∈O} F1_c,  O = {c : support_c + predicted_c > 0};  0 when O is empty
double ConfusionMatrix::macro_f1() const {
  double sum = 0;
  int64_t occurring = 0;
  for (int64_t c = 0; c < k_; ++c) {
    if (support(c) + predicted(c) == 0) continue;
    sum += f1(c);
    ++occurring;
  }
  return occurring == 0 ? 0.0 : sum / double(occurring);
}

// accuracy = Σ_c TP_c / total;  0 when total = 0
double ConfusionMatrix::accuracy() const {
  if (total_ == 0) return 0.0;
  int64_t diagonal = 0;
  for (int64_t c = 0; c < k_; ++c) diagonal += counts_[size_t(c * k_ + c)];
  return double(diagonal) / double(total_);
}

}  // namespace tapestry::metrics
