/// @file
/// The masked copy task (clustered-attention paper, supplementary §C.2).
///
/// A random word w of L symbols from {1..10}; the target is 0 w 0 w (0 the separator, N = 2L + 2).
/// The input is the target with about 20% of the symbols of the first copy and about 20% of the
/// second copy replaced by a mask token, at positions chosen so that every masked symbol is visible
/// in the other copy: to solve the task a model has to attend to the matching position of the other
/// half.
#pragma once

#include "core/random.h"
#include "core/tensor.h"

namespace tapestry::data {

/// A batch of the copy task (CopyTask::sample), on the CPU.
struct CopyTaskBatch {
  Tensor input;   ///< (B, N) int64, symbols 1..10, separator 0, mask token 11
  Tensor target;  ///< (B, N) int64: 0 w 0 w
  Tensor masked;  ///< (B, N) bool: the positions that were masked in the input
};

/// The task's settings and its token ids.
struct CopyTask {
  static constexpr int64_t kSeparator = 0;  ///< the token before each copy
  static constexpr int64_t kSymbols = 10;    ///< symbols are 1..kSymbols
  static constexpr int64_t kMask = 11;  ///< the token that replaces a masked symbol in the input
  static constexpr int64_t kVocabulary = 12;  ///< the number of token ids: separator, symbols and mask

  int64_t length = 31;         ///< L
  double mask_fraction = 0.2;  ///< of each copy

  /// N = 2L + 2, the length of an input and of its target.
  int64_t sequence_length() const { return 2 * length + 2; }
  /// A batch of `batch` sequences drawn from gen. Throws Error for length < 1, batch < 1, or a mask
  /// fraction outside [0, 0.5] (beyond 0.5 the two copies cannot hide disjoint positions).
  CopyTaskBatch sample(int64_t batch, Generator& gen) const;
};

}  // namespace tapestry::data
