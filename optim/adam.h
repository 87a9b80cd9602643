/// @file
/// Adam (Kingma & Ba 2015) and AdamW (Loshchilov & Hutter 2019).
#pragma once

#include <utility>
#include <vector>

#include "optim/optimizer.h"

namespace tapestry::optim {

/// Whether Adam / AdamW divide by the running maximum of the second moment (AMSGrad).
enum class AmsGrad {
  No,   ///< Adam's v̂
  Yes,  ///< AMSGrad (Reddi et al. 2018, "On the Convergence of Adam and Beyond", Algorithm 2), as
        ///< PyTorch's amsgrad=True: v_max ← max(v_max, v), then v̂ = v_max / (1 − β₂ᵗ)
};

/// Settings of Adam.
struct AdamOptions {
  double lr = 1e-3;  ///< learning rate α
  std::pair<double, double> betas = {0.9, 0.999};  ///< β₁, β₂, each in [0, 1)
  double eps = 1e-8;                               ///< ε > 0
  double weight_decay = 0.0;                       ///< λ ≥ 0: L2, added to the gradient
  AmsGrad amsgrad = AmsGrad::No;                   ///< AMSGrad's running maximum of v
};

/// Per step t of a parameter with a gradient (m, v start at 0):
///   g ← g + λθ
///   m ← β₁ m + (1 − β₁) g,   v ← β₂ v + (1 − β₂) g²
///   θ ← θ − lr·m̂ / (√v̂ + ε),   m̂ = m / (1 − β₁ᵗ),  v̂ = v / (1 − β₂ᵗ)
/// With AmsGrad::Yes, v_max ← max(v_max, v) after v's update and v̂ = v_max / (1 − β₂ᵗ) instead.
/// State: "exp_avg" (m), "exp_avg_sq" (v), and with AMSGrad "max_exp_avg_sq" (v_max), which
/// state_dict() and checkpoints carry like the others.
class Adam : public Optimizer {
 public:
  /// Updates `params` with these settings; throws Error for settings out of range.
  explicit Adam(std::vector<Tensor> params, AdamOptions options = {});
  const AdamOptions& options() const { return options_; }  ///< its settings

 private:
  void update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& buffers, int64_t t,
              const ParamGroup& group, CpuUpdates& cpu) override;
  AdamOptions options_;
};

/// Settings of AdamW.
struct AdamWOptions {
  double lr = 1e-3;  ///< learning rate α
  std::pair<double, double> betas = {0.9, 0.999};  ///< β₁, β₂, each in [0, 1)
  double eps = 1e-8;                               ///< ε > 0
  double weight_decay = 1e-2;                      ///< λ ≥ 0: decoupled, see below
  AmsGrad amsgrad = AmsGrad::No;                   ///< AMSGrad's running maximum of v
};

/// Adam with decoupled weight decay: the decay shrinks θ directly instead of entering the moments.
/// Per step t of a parameter with a gradient:
///   m ← β₁ m + (1 − β₁) g,   v ← β₂ v + (1 − β₂) g²
///   θ ← θ − lr·λ·θ − lr·m̂ / (√v̂ + ε)     (both terms use θ from before the step)
/// that is θ ← θ·(1 − lr·λ) − lr·m̂ / (√v̂ + ε). Loshchilov & Hutter, Algorithm 2 line 12, write
/// θ_t ← θ_{t−1} − η_t(α m̂_t/(√v̂_t + ε) + λθ_{t−1}) with η_t the schedule multiplier; like PyTorch's
/// AdamW we scale the decay by lr = η_t·α instead of η_t, so λ here is the paper's λ divided by α, and
/// a schedule that changes lr scales the decay with it. AmsGrad::Yes as in Adam.
/// State: "exp_avg" (m), "exp_avg_sq" (v), and with AMSGrad "max_exp_avg_sq" (v_max).
class AdamW : public Optimizer {
 public:
  /// Updates `params` with these settings; throws Error for settings out of range.
  explicit AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  const AdamWOptions& options() const { return options_; }  ///< its settings

 private:
  void update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& buffers, int64_t t,
              const ParamGroup& group, CpuUpdates& cpu) override;
  AdamWOptions options_;
};

}  // namespace tapestry::optim
