#include "nn/loss.h"

#include "ops/loss.h"

namespace tapestry::nn {

CrossEntropyLoss::CrossEntropyLoss(const CrossEntropyOptions& options) : Module("CrossEntropyLoss"), options_(options) {
  TP_CHECK(options.label_smoothing >= 0 && options.label_smoothing < 1, name(),
           "label_smoothing must lie in [0, 1), got ", options.label_smoothing);
}

Tensor CrossEntropyLoss::forward(const Tensor& logits, const Tensor& targets) {
  TP_CHECK(logits.defined() && is_floating(logits.dtype()) && logits.dim() >= 1, name(),
           "logits must be a floating tensor (..., C), got ",
           logits.defined() ? dtype_name(logits.dtype()) + std::string(" of shape ") + to_string(logits.shape())
                            : std::string("an undefined tensor"));
  TP_CHECK(targets.defined() && is_integer(targets.dtype()), name(), "targets must be int64 or int32 class indices, got ",
           targets.defined() ? dtype_name(targets.dtype()) : "an undefined tensor");
  const Shape expected(logits.shape().begin(), logits.shape().end() - 1);
  TP_CHECK(targets.shape() == expected, name(), "targets must have the shape of logits without its last dim, ",
           to_string(expected), ", got ", to_string(targets.shape()), " (logits ", to_string(logits.shape()), ")");
  TP_CHECK(targets.device() == logits.device(), name(), "targets are on ", targets.device(), " but logits on ",
           logits.device());
  return cross_entropy(logits, targets, options_.ignore_index, options_.label_smoothing);
}

}  // namespace tapestry::nn
