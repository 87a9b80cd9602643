/// @file
/// Deterministic, stratified splits of labelled items, decided by a hash of each item's key (a
/// document's path relative to its corpus, say) and never by a seed: an item keeps its split when
/// others are added or removed, and every run of every program agrees on it (docs/DATA.md).
///
///   const auto by_class = data::hash_order(keys, labels, classes, max_per_class);
///   data::Split s = data::stratified_split(by_class, 0.1, 0.1);   // train / valid / test
///   data::Split f = data::stratified_fold(by_class, 5, 2);        // fold 2 of 5 is the test split
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tapestry::data {

/// The 64-bit FNV-1a hash of the bytes of `text`.
uint64_t fnv1a(std::string_view text);

/// Item indices of each split.
struct Split {
  ///@{
  /// The items of the training, validation and test splits.
  std::vector<int64_t> train, valid, test;
  ///@}
};

/// Each class's items (indices into keys / labels) ordered by (fnv1a(key), key), cut to the first
/// `max_per_class` (0: all). Throws Error when keys and labels differ in length or a label is outside
/// [0, classes).
std::vector<std::vector<int64_t>> hash_order(const std::vector<std::string>& keys, const std::vector<int64_t>& labels,
                                             int64_t classes, int64_t max_per_class = 0);

/// Within each class, in hash order: the first round(n · test_fraction) items are test, the next
/// round(n · valid_fraction) valid, the rest train. A held-out share is at least one item when its
/// fraction is positive and the class has at least 3 items (a smaller class trains on all of them).
/// Throws Error unless both fractions lie in [0, 1) and their sum is below 1.
Split stratified_split(const std::vector<std::vector<int64_t>>& by_class, double valid_fraction, double test_fraction);

/// K-fold cross-validation: the item at position j of its class (hash order) belongs to fold j mod
/// `folds`; fold `fold` is the test split, every other fold trains, valid is empty. Over the folds
/// each item is tested exactly once, and every class is spread over the folds as evenly as its size
/// allows. Throws Error unless 2 ≤ folds and 0 ≤ fold < folds.
Split stratified_fold(const std::vector<std::vector<int64_t>>& by_class, int64_t folds, int64_t fold);

}  // namespace tapestry::data
