/// @file
/// Losses as modules. They hold settings, not parameters.
#pragma once

#include <cstdint>

#include "nn/module.h"

namespace tapestry::nn {

/// Settings of CrossEntropyLoss (ops/loss.h: cross_entropy).
struct CrossEntropyOptions {
  int64_t ignore_index = -100;   ///< targets equal to it add nothing (padding)
  double label_smoothing = 0.0;  ///< ε in [0, 1)
};

/// The mean cross-entropy of logits (..., C) against class indices (...) (ops/loss.h: classes along
/// the LAST dim; 0 with zero gradient when every target is ignored). Returns a 0-d tensor.
class CrossEntropyLoss : public Module {
 public:
  /// A loss with these settings; it has no parameters.
  explicit CrossEntropyLoss(const CrossEntropyOptions& options = {});
  /// The loss of logits (..., C) against targets (...).
  Tensor forward(const Tensor& logits, const Tensor& targets);
  const CrossEntropyOptions& options() const { return options_; }  ///< its settings

 private:
  CrossEntropyOptions options_;
};

}  // namespace tapestry::nn
