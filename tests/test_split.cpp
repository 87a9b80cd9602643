// Deterministic stratified splits and folds (data/split.h), and the mean ± std of repeated
// measurements (metrics/summary.h).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "data/split.h"
#include "metrics/summary.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// `per_class[c]` items of class c, keyed "c<class>/<n>".
struct Items {
  std::vector<std::string> keys;
  std::vector<int64_t> labels;
};

Items items(const std::vector<int64_t>& per_class) {
  Items it;
  for (size_t c = 0; c < per_class.size(); ++c)
    for (int64_t n = 0; n < per_class[c]; ++n) {
      it.keys.push_back("c" + std::to_string(c) + "/" + std::to_string(n));
      it.labels.push_back(int64_t(c));
    }
  return it;
}

}  // namespace

TEST_CASE("fnv1a: the published 64-bit FNV-1a test vectors") {
  CHECK(data::fnv1a("") == 0xcbf29ce484222325ull);   // the offset basis
  CHECK(data::fnv1a("a") == 0xaf63dc4c8601ec8cull);
  CHECK(data::fnv1a("foobar") == 0x85944171f73967e8ull);
}

TEST_CASE("hash_order: each class in hash order, cut to max_per_class; bad input is refused") {
  const Items it = items({5, 3});
  const auto by_class = data::hash_order(it.keys, it.labels, 2);
  REQUIRE(by_class.size() == 2);
  CHECK(by_class[0].size() == 5);
  CHECK(by_class[1].size() == 3);
  for (const auto& members : by_class)
    for (size_t j = 1; j < members.size(); ++j)
      CHECK(data::fnv1a(it.keys[size_t(members[j - 1])]) <= data::fnv1a(it.keys[size_t(members[j])]));
  const auto cut = data::hash_order(it.keys, it.labels, 2, 2);
  CHECK(cut[0] == std::vector<int64_t>(by_class[0].begin(), by_class[0].begin() + 2));
  CHECK(cut[1].size() == 2);

  check_error([&] { data::hash_order(it.keys, {0, 1}, 2); }, {"hash_order", "differ in length", "8 vs 2"});
  check_error([&] { data::hash_order(it.keys, it.labels, 1); }, {"hash_order", "c1/0", "label 1", "[0, 1)"});
}

TEST_CASE("stratified_split: shares per class; an item keeps its split when others come or go") {
  const Items it = items({10, 20, 2});
  const data::Split s = data::stratified_split(data::hash_order(it.keys, it.labels, 3), 0.1, 0.2);
  // class 0: 2 test, 1 valid, 7 train; class 1: 4, 2, 14; class 2 (under 3 items): all train.
  CHECK(s.test.size() == 6);
  CHECK(s.valid.size() == 3);
  CHECK(s.train.size() == 23);
  std::vector<int64_t> all = s.train;
  all.insert(all.end(), s.valid.begin(), s.valid.end());
  all.insert(all.end(), s.test.begin(), s.test.end());
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i < all.size(); ++i) CHECK(all[i] == int64_t(i));

  // Remove class 1's items: class 0's split is unchanged (indices 0..9 keep their meaning).
  const Items fewer = items({10});
  const data::Split f = data::stratified_split(data::hash_order(fewer.keys, fewer.labels, 1), 0.1, 0.2);
  const auto of_class0 = [](std::vector<int64_t> v) {
    v.erase(std::remove_if(v.begin(), v.end(), [](int64_t i) { return i >= 10; }), v.end());
    return v;
  };
  CHECK(of_class0(s.test) == f.test);
  CHECK(of_class0(s.valid) == f.valid);
  CHECK(of_class0(s.train) == f.train);

  check_error([&] { data::stratified_split({}, 0.5, 0.5); }, {"stratified_split", "below 1"});
  check_error([&] { data::stratified_split({}, -0.1, 0.2); }, {"stratified_split", "negative"});
}

TEST_CASE("stratified_fold: every item is tested exactly once; classes spread evenly over the folds") {
  const Items it = items({10, 7, 1});
  const auto by_class = data::hash_order(it.keys, it.labels, 3);
  std::vector<int> tested(it.keys.size(), 0);
  for (int64_t fold = 0; fold < 3; ++fold) {
    const data::Split s = data::stratified_fold(by_class, 3, fold);
    CHECK(s.valid.empty());
    CHECK(s.train.size() + s.test.size() == it.keys.size());
    for (const int64_t i : s.test) ++tested[size_t(i)];
    int64_t class0 = 0;
    for (const int64_t i : s.test) class0 += it.labels[size_t(i)] == 0;
    CHECK(class0 == (fold == 0 ? 4 : 3));  // 10 items dealt into 3 folds: 4, 3, 3
  }
  for (const int t : tested) CHECK(t == 1);

  check_error([&] { data::stratified_fold(by_class, 1, 0); }, {"stratified_fold", "2 <= folds", "fold 0 of 1"});
  check_error([&] { data::stratified_fold(by_class, 3, 3); }, {"stratified_fold", "fold 3 of 3"});
}

TEST_CASE("summarize: mean and sample standard deviation") {
  const metrics::Summary s = metrics::summarize({1, 2, 3, 4});
  CHECK(s.n == 4);
  CHECK(s.mean == 2.5);
  CHECK(s.std == doctest::Approx(std::sqrt(5.0 / 3.0)).epsilon(1e-15));  // (2.25 + 0.25 + 0.25 + 2.25) / 3
  CHECK(metrics::summarize({7}).std == 0);
  check_error([] { metrics::summarize({}); }, {"summarize", "at least one value"});
}
