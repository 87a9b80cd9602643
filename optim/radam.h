/// @file
/// RAdam: Adam with a rectified adaptive learning rate (Liu et al. 2020, "On the Variance of the
/// Adaptive Learning Rate and Beyond", Algorithm 2), including its un-rectified first steps.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "optim/optimizer.h"

namespace tapestry::optim {

/// Which published form of RAdam's step to follow. They differ in two places only.
enum class RAdamConvention {
  /// The paper's Algorithm 2: rectified where ρ_t > 4, ε added after the bias correction:
  /// θ ← θ − lr·r_t·m̂ / (√v̂ + ε).
  Paper,
  /// torch.optim.RAdam (and the authors' code): rectified where ρ_t > 5, ε added before the bias
  /// correction: θ ← θ − lr·r_t·m̂·√(1 − β₂ᵗ) / (√v + ε). Equal to PyTorch's step up to rounding.
  PyTorch,
};

/// Settings of RAdam.
struct RAdamOptions {
  double lr = 1e-3;  ///< learning rate α
  std::pair<double, double> betas = {0.9, 0.999};  ///< β₁, β₂, each in [0, 1)
  double eps = 1e-8;                               ///< ε > 0
  double weight_decay = 0.0;                       ///< λ ≥ 0: L2, added to the gradient
  RAdamConvention convention = RAdamConvention::Paper;  ///< the paper's rule, or PyTorch's
};

/// The length of the approximated simple moving average at step t ≥ 1 (Algorithm 2):
///   ρ_∞ = 2/(1 − β₂) − 1,   ρ_t = ρ_∞ − 2tβ₂ᵗ/(1 − β₂ᵗ).
/// ρ_1 = 1 and ρ_t grows to ρ_∞; with β₂ = 0.999, ρ_t ≤ 4 for t ≤ 4 and ρ_5 ≈ 4.996.
double radam_rho(int64_t t, double beta2);
/// The variance rectification term, defined where ρ_t > 4 (Algorithm 2):
///   r_t = √((ρ_t − 4)(ρ_t − 2)ρ_∞ / ((ρ_∞ − 4)(ρ_∞ − 2)ρ_t)).
double radam_rectification(int64_t t, double beta2);

/// Per step t of a parameter with a gradient (m, v start at 0):
///   g ← g + λθ
///   v ← β₂ v + (1 − β₂) g²,   m ← β₁ m + (1 − β₁) g,   m̂ = m / (1 − β₁ᵗ)
///   ρ_t > 4:  θ ← θ − lr·r_t·m̂ / (√v̂ + ε),  v̂ = v / (1 − β₂ᵗ)   (rectified adaptive step)
///   ρ_t ≤ 4:  θ ← θ − lr·m̂                                   (un-rectified momentum step)
/// The paper's adaptive rate l_t = √((1 − β₂ᵗ)/v_t) has no ε; by default this one is 1/(√v̂ + ε), with
/// ε where Adam has it, and the switch is ρ_t > 4 as in the paper. RAdamConvention::PyTorch switches
/// at ρ_t > 5 and uses √(1 − β₂ᵗ)/(√v + ε), so that a PyTorch run can be reproduced step for step
/// (with β₂ = 0.999 the two first differ at step 5: ρ_5 ≈ 4.996).
/// State: "exp_avg" (m), "exp_avg_sq" (v).
class RAdam : public Optimizer {
 public:
  /// Updates `params` with these settings; throws Error for settings out of range.
  explicit RAdam(std::vector<Tensor> params, RAdamOptions options = {});
  const RAdamOptions& options() const { return options_; }  ///< its settings

 private:
  void update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& buffers, int64_t t,
              const ParamGroup& group, CpuUpdates& cpu) override;
  RAdamOptions options_;
};

}  // namespace tapestry::optim
