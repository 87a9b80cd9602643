#include "metrics/edit_distance.h"

#include <limits>
#include <utility>

namespace tapestry::metrics {
namespace {

// d(i, j) = min(d(i−1, j−1) + [ref_i ≠ hyp_j], d(i−1, j) + 1, d(i, j−1) + 1), row by row; each cell
// keeps the counts of the path it chose (diagonal, then deletion, then insertion on ties), so the
// counts of one optimal alignment come out in O(|hyp|) memory.
template <class Sequence>
EditCounts align(const Sequence& ref, const Sequence& hyp) {
  std::vector<EditCounts> above(hyp.size() + 1), row(hyp.size() + 1);
  for (size_t j = 1; j <= hyp.size(); ++j) above[j].insertions = int64_t(j);  // d(0, j) = j
  for (size_t i = 1; i <= ref.size(); ++i) {
    row[0] = above[0];
    ++row[0].deletions;  // d(i, 0) = i
    for (size_t j = 1; j <= hyp.size(); ++j) {
      EditCounts best = above[j - 1];
      best.substitutions += ref[i - 1] != hyp[j - 1];
      if (above[j].distance() + 1 < best.distance()) {
        best = above[j];
        ++best.deletions;
      }
      if (row[j - 1].distance() + 1 < best.distance()) {
        best = row[j - 1];
        ++best.insertions;
      }
      row[j] = best;
    }
    std::swap(above, row);
  }
  return above[hyp.size()];
}

}  // namespace

EditCounts edit_distance(const std::vector<int64_t>& reference, const std::vector<int64_t>& hypothesis) {
  return align(reference, hypothesis);
}

EditCounts edit_distance(const std::vector<std::string>& reference, const std::vector<std::string>& hypothesis) {
  return align(reference, hypothesis);
}

EditCounts edit_distance(const std::string& reference, const std::string& hypothesis) {
  return align(reference, hypothesis);
}

EditCounts ErrorRate::add(const std::vector<int64_t>& reference, const std::vector<int64_t>& hypothesis) {
  const EditCounts e = edit_distance(reference, hypothesis);
  count(e, reference.size());
  return e;
}

EditCounts ErrorRate::add(const std::vector<std::string>& reference, const std::vector<std::string>& hypothesis) {
  const EditCounts e = edit_distance(reference, hypothesis);
  count(e, reference.size());
  return e;
}

void ErrorRate::count(const EditCounts& e, size_t reference_length) {
  counts_.substitutions += e.substitutions;
  counts_.insertions += e.insertions;
  counts_.deletions += e.deletions;
  reference_length_ += int64_t(reference_length);
}

void ErrorRate::merge(const ErrorRate& other) {
  count(other.counts_, size_t(other.reference_length_));
}

// rate = Σ(S + I + D) / Σ|reference|;  0/0 = 0, e/0 = +∞ for e > 0
double ErrorRate::value() const {
  if (reference_length_ == 0)
    return counts_.distance() == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return double(counts_.distance()) / double(reference_length_);
}

}  // namespace tapestry::metrics
