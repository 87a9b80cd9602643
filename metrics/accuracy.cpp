#include "metrics/accuracy.h"

#include "core/error.h"

namespace tapestry::metrics {

void Accuracy::add(const std::vector<int64_t>& predictions, const std::vector<int64_t>& targets) {
  TP_CHECK(predictions.size() == targets.size(), "Accuracy::add", predictions.size(), " predictions but ",
           targets.size(), " targets");
  for (size_t i = 0; i < predictions.size(); ++i) hits_ += predictions[i] == targets[i];
  total_ += int64_t(predictions.size());
}

void Accuracy::add(const std::vector<int64_t>& predictions, const std::vector<int64_t>& targets,
                   const std::vector<bool>& mask) {
  TP_CHECK(predictions.size() == targets.size() && targets.size() == mask.size(), "Accuracy::add",
           predictions.size(), " predictions, ", targets.size(), " targets and ", mask.size(),
           " mask entries; expected equal lengths");
  for (size_t i = 0; i < predictions.size(); ++i) {
    if (!mask[i]) continue;
    hits_ += predictions[i] == targets[i];
    ++total_;
  }
}

void Accuracy::merge(const Accuracy& other) {
  hits_ += other.hits_;
  total_ += other.total_;
}

// accuracy = hits / total;  0 when total = 0
double Accuracy::value() const { return total_ == 0 ? 0.0 : double(hits_) / double(total_); }

}  // namespace tapestry::metrics
