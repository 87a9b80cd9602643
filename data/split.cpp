#include "data/split.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"

namespace tapestry::data {

uint64_t fnv1a(std::string_view text) {
  uint64_t h = 14695981039346656037ull;  // the offset basis
  for (const unsigned char c : text) h = (h ^ c) * 1099511628211ull;  // the 64-bit FNV prime
  return h;
}

std::vector<std::vector<int64_t>> hash_order(const std::vector<std::string>& keys, const std::vector<int64_t>& labels,
                                             int64_t classes, int64_t max_per_class) {
  TP_CHECK(keys.size() == labels.size(), "hash_order", "keys and labels differ in length: ", keys.size(), " vs ",
           labels.size());
  TP_CHECK(classes >= 0 && max_per_class >= 0, "hash_order", "classes (", classes, ") and max_per_class (",
           max_per_class, ") must not be negative");
  std::vector<std::vector<std::pair<std::pair<uint64_t, std::string_view>, int64_t>>> order(static_cast<size_t>(classes));
  for (size_t i = 0; i < keys.size(); ++i) {
    TP_CHECK(labels[i] >= 0 && labels[i] < classes, "hash_order", "item ", i, " ('", keys[i], "') has label ",
             labels[i], ", outside [0, ", classes, ")");
    order[size_t(labels[i])].push_back({{fnv1a(keys[i]), keys[i]}, int64_t(i)});
  }
  std::vector<std::vector<int64_t>> by_class(static_cast<size_t>(classes));
  for (size_t c = 0; c < order.size(); ++c) {
    std::sort(order[c].begin(), order[c].end());
    if (max_per_class > 0 && int64_t(order[c].size()) > max_per_class) order[c].resize(size_t(max_per_class));
    for (const auto& entry : order[c]) by_class[c].push_back(entry.second);
  }
  return by_class;
}

Split stratified_split(const std::vector<std::vector<int64_t>>& by_class, double valid_fraction, double test_fraction) {
  TP_CHECK(valid_fraction >= 0 && test_fraction >= 0 && valid_fraction + test_fraction < 1, "stratified_split",
           "fractions must not be negative and must sum to below 1, got valid ", valid_fraction, " and test ",
           test_fraction);
  const auto share = [](int64_t n, double fraction) -> int64_t {
    if (fraction <= 0 || n < 3) return 0;
    return std::max<int64_t>(1, std::llround(double(n) * fraction));
  };
  Split split;
  for (const std::vector<int64_t>& members : by_class) {
    const int64_t n = int64_t(members.size()), test = share(n, test_fraction), valid = share(n, valid_fraction);
    for (int64_t j = 0; j < n; ++j)
      (j < test ? split.test : j < test + valid ? split.valid : split.train).push_back(members[size_t(j)]);
  }
  return split;
}

Split stratified_fold(const std::vector<std::vector<int64_t>>& by_class, int64_t folds, int64_t fold) {
  TP_CHECK(folds >= 2 && fold >= 0 && fold < folds, "stratified_fold", "needs 2 <= folds and 0 <= fold < folds, got fold ",
           fold, " of ", folds);
  Split split;
  for (const std::vector<int64_t>& members : by_class)
    for (size_t j = 0; j < members.size(); ++j)
      (int64_t(j) % folds == fold ? split.test : split.train).push_back(members[j]);
  return split;
}

}  // namespace tapestry::data
