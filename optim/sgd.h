/// @file
/// Stochastic gradient descent with optional momentum, Nesterov momentum and L2 weight decay.
#pragma once

#include <vector>

#include "optim/optimizer.h"

namespace tapestry::optim {

/// Whether SGD's momentum is Nesterov's.
enum class Nesterov { No, Yes };

/// Settings of SGD.
struct SGDOptions {
  double lr = 1e-2;  ///< learning rate
  double momentum = 0.0;      ///< μ in [0, 1); 0: plain SGD, no state
  double weight_decay = 0.0;  ///< λ ≥ 0, added to the gradient: g ← g + λθ
  Nesterov nesterov = Nesterov::No;  ///< Yes needs momentum > 0
};

/// One plain SGD step of `param` (contiguous, float32 or float64) from `grad` (contiguous, the same
/// shape, dtype and device), in place and off the tape: θ ← θ − lr·(g + λθ), λ = weight_decay.
/// SGD without momentum is this; so is a parameter group with rule=sgd (optim/param_groups.h). Given
/// `cpu`, the CPU's work is queued there (an optimizer's step: optim/apply_rule.h); else it runs now.
void sgd_step(const Tensor& param, const Tensor& grad, double lr, double weight_decay, CpuUpdates* cpu = nullptr);

/// Per step, for each parameter with a gradient (the buffer b starts at 0):
///   g ← g + λθ;   b ← μ b + g;   θ ← θ − lr·(g + μ b) with Nesterov, θ ← θ − lr·b without.
/// State: "momentum_buffer" (when momentum > 0).
class SGD : public Optimizer {
 public:
  /// Updates `params` with these settings; throws Error for settings out of range.
  explicit SGD(std::vector<Tensor> params, SGDOptions options = {});
  const SGDOptions& options() const { return options_; }  ///< its settings

 private:
  void update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& buffers, int64_t t,
              const ParamGroup& group, CpuUpdates& cpu) override;
  SGDOptions options_;
};

}  // namespace tapestry::optim
