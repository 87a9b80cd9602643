/// @file
/// Accuracy: the fraction of counted positions whose prediction equals its target.
///
///   metrics::Accuracy tokens, masked;
///   for (each batch) {
///     tokens.add(predictions, targets);          // every position
///     masked.add(predictions, targets, mask);    // only where mask[i] is true
///   }
///   tokens.value(), masked.value();
///
/// Predictions and targets are class indices (any int64 values; they are only compared). An
/// accumulator sums hits and positions; `merge` adds another's counts, so per-rank or per-batch
/// counters combine into the corpus value exactly.
#pragma once

#include <cstdint>
#include <vector>

namespace tapestry::metrics {

/// Counts of hits and positions, accumulated over batches (see the top of this file).
class Accuracy {
 public:
  /// Counts every position i: a hit when predictions[i] == targets[i]. Throws when the lengths differ.
  void add(const std::vector<int64_t>& predictions, const std::vector<int64_t>& targets);
  /// Counts only the positions where mask[i] is true. Throws when the three lengths differ.
  void add(const std::vector<int64_t>& predictions, const std::vector<int64_t>& targets,
           const std::vector<bool>& mask);
  /// Adds another accumulator's hits and positions.
  void merge(const Accuracy& other);

  int64_t hits() const { return hits_; }  ///< the positions counted whose prediction equals the target
  int64_t total() const { return total_; }  ///< the positions counted
  /// hits / total, in [0, 1]. With nothing counted (total == 0) the value is 0: an accumulator that
  /// has seen no evidence claims no success. A caller with another convention for that case (the
  /// copy task reads "no masked position" as "every masked symbol copied") tests total() == 0.
  double value() const;

 private:
  int64_t hits_ = 0, total_ = 0;
};

}  // namespace tapestry::metrics
