#include "metrics/cluster_stats.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tapestry::metrics {

ClusterSizes cluster_sizes(const std::vector<int64_t>& ids, int64_t clusters) {
  TP_CHECK(clusters >= 1, "cluster_sizes", "needs at least one cluster, got ", clusters);
  ClusterSizes s;
  s.sizes.assign(size_t(clusters), 0);
  for (const int64_t id : ids)
    if (id >= 0 && id < clusters) ++s.sizes[size_t(id)], ++s.words;
  s.empty = std::count(s.sizes.begin(), s.sizes.end(), 0);
  if (s.words > 0) s.largest_share = double(*std::max_element(s.sizes.begin(), s.sizes.end())) / double(s.words);
  return s;
}

double normalized_entropy(const std::vector<double>& weights) {
  double total = 0;
  for (const double w : weights) {
    TP_CHECK(std::isfinite(w) && w >= 0, "normalized_entropy", "weights must be finite and non-negative, got ", w);
    total += w;
  }
  TP_CHECK(total > 0, "normalized_entropy", "the ", weights.size(), " weights are all 0 (no distribution)");
  if (weights.size() == 1) return 0;
  double h = 0;
  for (const double w : weights)
    if (w > 0) h -= (w / total) * std::log(w / total);
  return h / std::log(double(weights.size()));
}

double churn(const std::vector<int64_t>& a, const std::vector<int64_t>& b, int64_t clusters) {
  TP_CHECK(a.size() == b.size(), "churn", "the two clusterings have ", a.size(), " and ", b.size(), " words");
  int64_t words = 0, moved = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] < 0 || a[i] >= clusters || b[i] < 0 || b[i] >= clusters) continue;
    ++words;
    moved += a[i] != b[i];
  }
  return words == 0 ? 0.0 : double(moved) / double(words);
}

Spread spread(const std::vector<double>& values) {
  if (values.empty()) return {};
  Spread s{values[0], 0, values[0]};
  for (const double v : values) s.min = std::min(s.min, v), s.max = std::max(s.max, v), s.mean += v;
  s.mean /= double(values.size());
  return s;
}

std::vector<double> row_norms(const std::vector<double>& matrix, int64_t rows, int64_t cols) {
  TP_CHECK(rows >= 0 && cols >= 0 && int64_t(matrix.size()) == rows * cols, "row_norms", "a ", rows, " x ", cols,
           " matrix needs ", rows * cols, " values, got ", matrix.size());
  std::vector<double> norms(size_t(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += matrix[size_t(r * cols + c)] * matrix[size_t(r * cols + c)];
    norms[size_t(r)] = std::sqrt(s);
  }
  return norms;
}

}  // namespace tapestry::metrics
