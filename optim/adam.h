/// @file
/// Adam (Kingma & Ba 2015) and AdamW (Loshchilov & Hutter 2019).
#pragma once

#include <utility>
#include <vector>

#include "optim/optimizer.h"

namespace tapestry::optim {

/// Settings of Adam.
struct AdamOptions {
  double lr = 1e-3;  ///< learning rate α
  std::pair<double, double> betas = {0.9, 0.999};  ///< β₁, β₂, each in [0, 1)
  double eps = 1e-8;                               ///< ε > 0
  double weight_decay = 0.0;                       ///< λ ≥ 0: L2, added to the gradient
};

/// Per step t of a parameter with a gradient (m, v start at 0):
///   g ← g + λθ
///   m ← β₁ m + (1 − β₁) g,   v ← β₂ v + (1 − β₂) g²
///   θ ← θ − lr·m̂ / (√v̂ + ε),   m̂ = m / (1 − β₁ᵗ),  v̂ = v / (1 − β₂ᵗ)
/// State: "exp_avg" (m), "exp_avg_sq" (v).
class Adam : public Optimizer {
 public:
  /// Updates `params` with these settings; throws Error for settings out of range.
  explicit Adam(std::vector<Tensor> params, AdamOptions options = {});
  const AdamOptions& options() const { return options_; }  ///< its settings

 private:
  void update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& buffers,
              int64_t t) override;
  AdamOptions options_;
};

/// Settings of AdamW.
struct AdamWOptions {
  double lr = 1e-3;  ///< learning rate α
  std::pair<double, double> betas = {0.9, 0.999};  ///< β₁, β₂, each in [0, 1)
  double eps = 1e-8;                               ///< ε > 0
  double weight_decay = 1e-2;                      ///< λ ≥ 0: decoupled, see below
};

/// Adam with decoupled weight decay: the decay shrinks θ directly instead of entering the moments.
/// Per step t of a parameter with a gradient:
///   m ← β₁ m + (1 − β₁) g,   v ← β₂ v + (1 − β₂) g²
///   θ ← θ − lr·λ·θ − lr·m̂ / (√v̂ + ε)     (both terms use θ from before the step)
/// that is θ ← θ·(1 − lr·λ) − lr·m̂ / (√v̂ + ε). Loshchilov & Hutter, Algorithm 2 line 12, write
/// θ_t ← θ_{t−1} − η_t(α m̂_t/(√v̂_t + ε) + λθ_{t−1}) with η_t the schedule multiplier; like PyTorch's
/// AdamW we scale the decay by lr = η_t·α instead of η_t, so λ here is the paper's λ divided by α, and
/// a schedule that changes lr scales the decay with it.
/// State: "exp_avg" (m), "exp_avg_sq" (v).
class AdamW : public Optimizer {
 public:
  /// Updates `params` with these settings; throws Error for settings out of range.
  explicit AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  const AdamWOptions& options() const { return options_; }  ///< its settings

 private:
  void update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& buffers,
              int64_t t) override;
  AdamWOptions options_;
};

}  // namespace tapestry::optim
