/// @file
/// Mixed precision in bfloat16 (docs/MIXED-PRECISION.md; PyTorch's autocast is the model). Inside an
/// AutocastScope, on the thread that opened it:
///   - matmul and linear compute in bfloat16 with float32 accumulation: their float32 operands are
///     converted first (by `to`, so gradients flow back to the float32 tensors, the master weights);
///   - the ops that need float32's precision — softmax, log_softmax, logsumexp, layer norm, the
///     losses, max / min, sorting and the clustering ops — convert bfloat16 inputs to float32 and
///     give float32 results (layer norm keeps for its backward x̂ in bfloat16, not its float32 input);
///   - an elementwise op (or fused attention) on float32 and bfloat16 operands computes in float32
///     (the wider type);
///   - every other op keeps its input's dtype (shape ops, dropout, activations, embedding, fused
///     attention of bfloat16 q, k and v).
/// Parameters and optimizer state stay float32, and nothing else changes outside a scope: there an op
/// given bfloat16 operands of mixed dtypes refuses them, as for any two dtypes.
///
/// No loss scaling: bfloat16 has float32's exponent range, so gradients that float32 represents do
/// not underflow in bfloat16 (float16's 5-bit exponent is why float16 needs scaling).
///
///   AutocastScope autocast;           // or AutocastScope autocast(precision == "bf16");
///   Tensor loss = model.forward(batch);
///   loss.backward();                  // (backward outside the scope is the same: casts are on the tape)
#pragma once

#include <functional>
#include <initializer_list>
#include <utility>

#include "core/tensor.h"

namespace tapestry {

/// Whether autocast to bfloat16 is on for this thread.
bool autocast_enabled();

/// Turns autocast to bfloat16 on (or, with `enabled` false, off) for its scope on this thread, and
/// restores the previous setting after.
class AutocastScope {
 public:
  /// Autocast on (or off, with `enabled` false) until the scope ends.
  explicit AutocastScope(bool enabled = true);
  ~AutocastScope();  ///< restores the previous setting
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool previous_;
};

/// For the ops that compute in bfloat16 under autocast (matmul, linear): x as bfloat16 when autocast
/// is on and x is float32; x itself otherwise.
Tensor autocast_lower(const Tensor& x);
/// For the ops that compute in float32 under autocast: x as float32 when autocast is on and x is
/// bfloat16; x itself otherwise (outside autocast the op's own dtype check decides).
Tensor autocast_float32(const Tensor& x);
/// Whether autocast_float32 converts any of `inputs`. Such an op begins
///   if (autocast_widens({&x})) return softmax(autocast_float32(x), mask);
bool autocast_widens(std::initializer_list<const Tensor*> inputs);
/// For binary elementwise ops: under autocast, a float32 and a bfloat16 operand both as float32;
/// the operands themselves otherwise.
std::pair<Tensor, Tensor> autocast_promote(const Tensor& a, const Tensor& b);

/// For a kernel with no bfloat16 form that adds `src` into `y` (index_add, scatter_add, embedding's
/// backward): with y bfloat16, runs `add(y32, src32)` on float32 copies of y and src and rounds the
/// sums back into y once, rather than at every term. Returns whether it did (false, doing nothing,
/// for any other dtype of y).
bool add_in_float32(const Tensor& y, const Tensor& src,
                    const std::function<void(const Tensor& y32, const Tensor& src32)>& add);

}  // namespace tapestry
