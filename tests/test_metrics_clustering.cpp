// Clustering scores (metrics/clustering.h) and the assignment solver under them
// (metrics/assignment.h): tables and values worked out by hand, degenerate partitions, the solver
// against brute force and at a few hundred clusters, bad input.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "metrics/assignment.h"
#include "metrics/clustering.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::metrics;
using namespace tapestry::testing;

namespace {

int64_t total_cost(const std::vector<int64_t>& cost, int64_t cols, const std::vector<int64_t>& column_of) {
  int64_t sum = 0;
  for (size_t r = 0; r < column_of.size(); ++r)
    if (column_of[r] >= 0) sum += cost[r * size_t(cols) + size_t(column_of[r])];
  return sum;
}

// The cheapest assignment by trying every ordering of the columns (rows ≤ cols).
int64_t brute_force_cost(const std::vector<int64_t>& cost, int64_t rows, int64_t cols) {
  std::vector<int64_t> perm(static_cast<size_t>(cols));
  std::iota(perm.begin(), perm.end(), 0);
  int64_t best = std::numeric_limits<int64_t>::max();
  do {
    best = std::min(best, total_cost(cost, cols, std::vector<int64_t>(perm.begin(), perm.begin() + rows)));
  } while (std::next_permutation(perm.begin(), perm.end()));
  return best;
}

}  // namespace

TEST_CASE("metrics: ContingencyTable compacts ids") {
  // clusters 7 7 3 3 3, classes 10 2 2 2 10 → rows (3, 7), columns (2, 10):
  //   cluster 3: class 2 ×2, class 10 ×1;  cluster 7: class 2 ×1, class 10 ×1
  const ContingencyTable t({7, 7, 3, 3, 3}, {10, 2, 2, 2, 10});
  CHECK(t.cluster_ids() == std::vector<int64_t>{3, 7});
  CHECK(t.class_ids() == std::vector<int64_t>{2, 10});
  CHECK(t.count(0, 0) == 2);
  CHECK(t.count(0, 1) == 1);
  CHECK(t.count(1, 0) == 1);
  CHECK(t.count(1, 1) == 1);
  CHECK(t.cluster_size(0) == 3);
  CHECK(t.class_size(1) == 2);
  CHECK(t.total() == 5);
}

TEST_CASE("metrics: majority and matched accuracy by hand") {
  // clusters 0 0 0 1 1 2, classes 0 0 1 0 0 1:
  //   n_kc: cluster 0 → (2, 1), cluster 1 → (2, 0), cluster 2 → (0, 1)
  // majority: 2 + 2 + 1 = 5 of 6 (clusters 0 and 1 both take class 0).
  // matched: three clusters, two classes, one cluster per class; the best pairs sum to 3
  //   (e.g. cluster 1 → class 0 (2), cluster 2 → class 1 (1)); 3 of 6.
  const ContingencyTable t({0, 0, 0, 1, 1, 2}, {0, 0, 1, 0, 0, 1});
  CHECK(majority_accuracy(t) == doctest::Approx(5.0 / 6));
  CHECK(matched_accuracy(t) == 0.5);

  // A relabelled perfect clustering scores 1 on all three measures.
  const ContingencyTable perfect({5, 5, 9, 9, 2}, {1, 1, 0, 0, 3});
  CHECK(majority_accuracy(perfect) == 1.0);
  CHECK(matched_accuracy(perfect) == 1.0);
  CHECK(normalized_mutual_info(perfect) == doctest::Approx(1.0).epsilon(1e-12));
}

TEST_CASE("metrics: normalized_mutual_info by hand") {
  // clusters 0 0 1 1, classes 0 0 0 1 (n = 4): n_00 = 2, n_10 = 1, n_11 = 1; a = (2, 2), b = (3, 1).
  //   MI   = 2/4·log(4·2/(2·3)) + 1/4·log(4·1/(2·3)) + 1/4·log(4·1/(2·1))
  //   H(K) = log 2;  H(C) = −(3/4·log 3/4 + 1/4·log 1/4)
  //   NMI  = MI / ((H(K) + H(C))/2) = 0.343711
  const double mi = 0.5 * std::log(4.0 / 3) + 0.25 * std::log(2.0 / 3) + 0.25 * std::log(2.0);
  const double h_k = std::log(2.0), h_c = -(0.75 * std::log(0.75) + 0.25 * std::log(0.25));
  const ContingencyTable t({0, 0, 1, 1}, {0, 0, 0, 1});
  CHECK(normalized_mutual_info(t) == doctest::Approx(mi / ((h_k + h_c) / 2)).epsilon(1e-12));
  CHECK(normalized_mutual_info(t) == doctest::Approx(0.343711).epsilon(1e-5));

  // Independent partitions: every n_kc = a_k·b_c/n, so every log is log 1 and NMI is exactly 0.
  CHECK(normalized_mutual_info(ContingencyTable({0, 1, 0, 1}, {0, 0, 1, 1})) == 0.0);
}

TEST_CASE("metrics: label_scores names the scores in the order a report shows them") {
  const std::vector<std::pair<std::string, double>> scores = label_scores({0, 0, 0, 1, 1, 2}, {0, 0, 1, 0, 0, 1});
  REQUIRE(scores.size() == 4);
  const ContingencyTable t({0, 0, 0, 1, 1, 2}, {0, 0, 1, 0, 0, 1});
  CHECK(scores[0] == std::pair<std::string, double>("majority_accuracy", majority_accuracy(t)));
  CHECK(scores[1] == std::pair<std::string, double>("matched_accuracy", 0.5));
  CHECK(scores[2] == std::pair<std::string, double>("nmi", normalized_mutual_info(t)));
  CHECK(scores[3] == std::pair<std::string, double>("clusters_used", 3.0));
  CHECK_THROWS(label_scores({0, 1}, {0}));
}

TEST_CASE("metrics: clustering scores of degenerate partitions") {
  // One cluster, one class.
  const ContingencyTable single({4, 4, 4}, {1, 1, 1});
  CHECK(majority_accuracy(single) == 1.0);
  CHECK(matched_accuracy(single) == 1.0);
  CHECK(normalized_mutual_info(single) == 1.0);

  // One cluster, classes of sizes 3, 1: both accuracies pick the larger class, 3/4; NMI 0.
  const ContingencyTable one_cluster({0, 0, 0, 0}, {0, 0, 0, 1});
  CHECK(majority_accuracy(one_cluster) == 0.75);
  CHECK(matched_accuracy(one_cluster) == 0.75);
  CHECK(normalized_mutual_info(one_cluster) == 0.0);

  // Clusters of sizes 2, 1, 1 over one class: every cluster is labelled with it (majority 1), but
  // only one cluster can be matched to it (the largest: 2/4); NMI 0.
  const ContingencyTable one_class({0, 0, 1, 2}, {3, 3, 3, 3});
  CHECK(majority_accuracy(one_class) == 1.0);
  CHECK(matched_accuracy(one_class) == 0.5);
  CHECK(normalized_mutual_info(one_class) == 0.0);

  // One point per cluster: majority is 1 (why it needs the number of clusters beside it);
  // matched takes one cluster per class, 2 of 4; NMI = 2·H(C)/(H(C) + log 4) = 2·log 2/(3·log 2) = 2/3.
  const ContingencyTable singletons({0, 1, 2, 3}, {0, 0, 1, 1});
  CHECK(majority_accuracy(singletons) == 1.0);
  CHECK(matched_accuracy(singletons) == 0.5);
  CHECK(normalized_mutual_info(singletons) == doctest::Approx(2.0 / 3).epsilon(1e-12));
}

TEST_CASE("metrics: clustering bad input") {
  check_error([] { ContingencyTable({0, 1}, {0}); }, {"ContingencyTable", "2 cluster ids", "1 class ids"});
  check_error([] { ContingencyTable({0, -1}, {0, 0}); }, {"ContingencyTable", "cluster -1", "point 1"});
  check_error([] { ContingencyTable({0, 1}, {0, -3}); }, {"ContingencyTable", "class -3"});
  const ContingencyTable empty({}, {});
  CHECK(empty.total() == 0);
  check_error([&] { majority_accuracy(empty); }, {"majority_accuracy", "no point"});
  check_error([&] { matched_accuracy(empty); }, {"matched_accuracy", "no point"});
  check_error([&] { normalized_mutual_info(empty); }, {"normalized_mutual_info", "no point"});
  check_error([&] { empty.count(0, 0); }, {"ContingencyTable::count", "(0, 0)"});
}

TEST_CASE("metrics: min_cost_assignment by hand") {
  // 3 × 3: of the six permutations, (0→1, 1→0, 2→2) costs 1 + 2 + 2 = 5; the others cost 6, 6, 7,
  // 9, 11.
  CHECK(min_cost_assignment({4, 1, 3, 2, 0, 5, 3, 2, 2}, 3, 3) == std::vector<int64_t>{1, 0, 2});
  // 2 × 3 [[1 2 3], [2 4 6]]: the six injections cost 5, 7, 4, 8, 5, 7; the best is (0→1, 1→0).
  CHECK(min_cost_assignment({1, 2, 3, 2, 4, 6}, 2, 3) == std::vector<int64_t>{1, 0});
  // Its transpose, 3 × 2: the same pairs, and the third row unmatched.
  CHECK(min_cost_assignment({1, 2, 2, 4, 3, 6}, 3, 2) == std::vector<int64_t>{1, 0, -1});
  CHECK(min_cost_assignment({}, 2, 0) == std::vector<int64_t>{-1, -1});
  CHECK(min_cost_assignment({}, 0, 3).empty());
}

TEST_CASE("metrics: min_cost_assignment matches brute force") {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t rows = 1 + int64_t(rng() % 5), cols = 1 + int64_t(rng() % 6);
    std::vector<int64_t> cost(size_t(rows * cols));
    for (int64_t& x : cost) x = int64_t(rng() % 21) - 10;  // negative costs too, and ties
    const std::vector<int64_t> column_of = min_cost_assignment(cost, rows, cols);
    INFO("trial " << trial << ": " << rows << " × " << cols);
    REQUIRE(int64_t(column_of.size()) == rows);
    // Distinct columns, min(rows, cols) of them.
    std::vector<int64_t> used;
    for (int64_t c : column_of)
      if (c >= 0) used.push_back(c);
    std::sort(used.begin(), used.end());
    CHECK(std::adjacent_find(used.begin(), used.end()) == used.end());
    CHECK(int64_t(used.size()) == std::min(rows, cols));
    if (rows <= cols) {
      CHECK(total_cost(cost, cols, column_of) == brute_force_cost(cost, rows, cols));
    } else {
      std::vector<int64_t> transposed(cost.size());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) transposed[size_t(c * rows + r)] = cost[size_t(r * cols + c)];
      CHECK(total_cost(cost, cols, column_of) == brute_force_cost(transposed, cols, rows));
    }
  }
}

TEST_CASE("metrics: min_cost_assignment at 300 × 400") {
  // A planted optimum: cost 0 on the pairs r → π(r), at least 1 elsewhere, so π is the unique
  // assignment of cost 0.
  const int64_t rows = 300, cols = 400;
  std::mt19937_64 rng(3);
  std::vector<int64_t> pi(static_cast<size_t>(cols));
  std::iota(pi.begin(), pi.end(), 0);
  std::shuffle(pi.begin(), pi.end(), rng);
  std::vector<int64_t> cost(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) cost[size_t(r * cols + c)] = c == pi[size_t(r)] ? 0 : 1 + int64_t(rng() % 50);
  CHECK(min_cost_assignment(cost, rows, cols) == std::vector<int64_t>(pi.begin(), pi.begin() + rows));
}

TEST_CASE("metrics: min_cost_assignment bad input") {
  check_error([] { min_cost_assignment({1, 2, 3}, 2, 2); }, {"min_cost_assignment", "2 × 2", "3 entries"});
  check_error([] { min_cost_assignment({}, -1, 2); }, {"min_cost_assignment", "-1 × 2"});
  check_error([] { min_cost_assignment({kMaxAssignmentCost + 1}, 1, 1); }, {"min_cost_assignment", "magnitude"});
}
