#include "metrics/clustering.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "metrics/assignment.h"

namespace tapestry::metrics {
namespace {

// The distinct values of `ids`, increasing.
std::vector<int64_t> distinct(std::vector<int64_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

int64_t index_of(const std::vector<int64_t>& sorted_ids, int64_t id) {
  return int64_t(std::lower_bound(sorted_ids.begin(), sorted_ids.end(), id) - sorted_ids.begin());
}

void check_not_empty(const ContingencyTable& table, const char* op) {
  TP_CHECK(table.total() > 0, op, "no point to score (the contingency table is empty)");
}

// −Σ_i (x_i/n) log(x_i/n) over the non-zero x_i
double entropy(const std::vector<int64_t>& sizes, int64_t n) {
  double h = 0;
  for (int64_t x : sizes)
    if (x > 0) h -= double(x) / double(n) * std::log(double(x) / double(n));
  return h;
}

}  // namespace

ContingencyTable::ContingencyTable(const std::vector<int64_t>& clusters, const std::vector<int64_t>& classes) {
  TP_CHECK(clusters.size() == classes.size(), "ContingencyTable", clusters.size(), " cluster ids but ",
           classes.size(), " class ids; expected one of each per point");
  for (size_t i = 0; i < clusters.size(); ++i)
    TP_CHECK(clusters[i] >= 0 && classes[i] >= 0, "ContingencyTable", "ids must be non-negative, got cluster ",
             clusters[i], " and class ", classes[i], " at point ", i);
  cluster_ids_ = distinct(clusters);
  class_ids_ = distinct(classes);
  counts_.assign(cluster_ids_.size() * class_ids_.size(), 0);
  for (size_t i = 0; i < clusters.size(); ++i)
    ++counts_[size_t(index_of(cluster_ids_, clusters[i]) * num_classes() + index_of(class_ids_, classes[i]))];
  total_ = int64_t(clusters.size());
}

int64_t ContingencyTable::count(int64_t k, int64_t c) const {
  TP_CHECK(k >= 0 && k < num_clusters() && c >= 0 && c < num_classes(), "ContingencyTable::count", "cell (", k,
           ", ", c, ") is outside the ", num_clusters(), " × ", num_classes(), " table");
  return counts_[size_t(k * num_classes() + c)];
}

int64_t ContingencyTable::cluster_size(int64_t k) const {
  int64_t sum = 0;
  for (int64_t c = 0; c < num_classes(); ++c) sum += count(k, c);
  return sum;
}

int64_t ContingencyTable::class_size(int64_t c) const {
  int64_t sum = 0;
  for (int64_t k = 0; k < num_clusters(); ++k) sum += count(k, c);
  return sum;
}

// majority = (1/n) Σ_k max_c n_kc
double majority_accuracy(const ContingencyTable& table) {
  check_not_empty(table, "majority_accuracy");
  int64_t correct = 0;
  for (int64_t k = 0; k < table.num_clusters(); ++k) {
    int64_t majority = 0;
    for (int64_t c = 0; c < table.num_classes(); ++c) majority = std::max(majority, table.count(k, c));
    correct += majority;
  }
  return double(correct) / double(table.total());
}

// matched = (1/n) max_σ Σ_k n_{k,σ(k)}: a min-cost assignment on the costs −n_kc
double matched_accuracy(const ContingencyTable& table) {
  check_not_empty(table, "matched_accuracy");
  const int64_t rows = table.num_clusters(), cols = table.num_classes();
  std::vector<int64_t> cost(size_t(rows * cols));
  for (int64_t k = 0; k < rows; ++k)
    for (int64_t c = 0; c < cols; ++c) cost[size_t(k * cols + c)] = -table.count(k, c);
  const std::vector<int64_t> class_of = min_cost_assignment(cost, rows, cols);
  int64_t correct = 0;
  for (int64_t k = 0; k < rows; ++k)
    if (class_of[size_t(k)] >= 0) correct += table.count(k, class_of[size_t(k)]);
  return double(correct) / double(table.total());
}

// MI = Σ_{k,c} (n_kc/n) log(n·n_kc / (a_k·b_c));  NMI = MI / ((H(K) + H(C))/2)
double normalized_mutual_info(const ContingencyTable& table) {
  check_not_empty(table, "normalized_mutual_info");
  if (table.num_clusters() == 1 && table.num_classes() == 1) return 1.0;  // H(K) = H(C) = 0: a perfect match
  const int64_t n = table.total();
  std::vector<int64_t> a(size_t(table.num_clusters())), b(size_t(table.num_classes()));
  for (int64_t k = 0; k < table.num_clusters(); ++k) a[size_t(k)] = table.cluster_size(k);
  for (int64_t c = 0; c < table.num_classes(); ++c) b[size_t(c)] = table.class_size(c);

  double mi = 0;
  for (int64_t k = 0; k < table.num_clusters(); ++k)
    for (int64_t c = 0; c < table.num_classes(); ++c) {
      const int64_t nkc = table.count(k, c);
      if (nkc == 0) continue;
      // The products are exact integers in double up to n² < 2^53; equal products give log 1 = 0
      // exactly, so independent partitions score exactly 0.
      mi += double(nkc) / double(n) *
            std::log(double(n) * double(nkc) / (double(a[size_t(k)]) * double(b[size_t(c)])));
    }
  if (mi <= 0) return 0.0;  // rounding can leave a tiny negative sum for independent partitions
  return mi / ((entropy(a, n) + entropy(b, n)) / 2);
}

std::vector<std::pair<std::string, double>> label_scores(const std::vector<int64_t>& clusters,
                                                         const std::vector<int64_t>& classes) {
  const ContingencyTable table(clusters, classes);
  return {{"majority_accuracy", majority_accuracy(table)},
          {"matched_accuracy", matched_accuracy(table)},
          {"nmi", normalized_mutual_info(table)},
          {"clusters_used", double(table.num_clusters())}};
}

}  // namespace tapestry::metrics
