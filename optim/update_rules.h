/// @file
/// The per-element update rules of the optimizers, written once for both backends.
///
/// Each rule is a functor that updates one element of a parameter in place from its gradient and its
/// state buffers: rule(θ, g, buffers...). The host computes every scalar that depends only on the step
/// (bias corrections, the RAdam rectification) once per step and stores it in the functor, so a
/// kernel (the OpenMP loop of optim/apply_rule.h, or the CUDA kernel of optim/cuda/apply_rule.cu)
/// evaluates the whole update in one pass over the elements. Notation: θ parameter, g gradient, t the
/// parameter's step count (1 for its first update), lr learning rate, λ weight decay, β momentum /
/// decay rates, ε the denominator's guard. lr and λ are those of the parameter's group (the optimizer's
/// own unless a parameter group sets them, optim/param_groups.h).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/macros.h"

namespace tapestry::optim {

/// SGD with momentum μ (Sutskever et al. 2013, in the form PyTorch uses; the buffer starts at 0, so
/// b₁ = g₁):
///   g ← g + λθ                  (L2 weight decay)
///   b ← μ b + g
///   d = g + μ b   (Nesterov)   or   d = b
///   θ ← θ − lr·d
/// With μ = 0 the buffer is a scratch value and the rule is θ ← θ − lr·(g + λθ).
template <class T>
struct SGDRule {
  ///@{
  /// lr, μ and λ
  T lr, momentum, weight_decay;
  ///@}
  bool nesterov;  ///< Nesterov's form of momentum

  /// Updates one element θ with its gradient g and momentum buffer b.
  TP_HOST_DEVICE void operator()(T& theta, T g, T& buffer) const {
    g += weight_decay * theta;
    buffer = momentum * buffer + g;
    const T d = nesterov ? g + momentum * buffer : buffer;
    theta -= lr * d;
  }
};

/// SGD with μ = 0 keeps no state: SGDRule with a per-element scratch buffer, so b = g and
/// θ ← θ − lr·(g + λθ).
template <class T>
struct SGDStatelessRule {
  SGDRule<T> rule;  ///< the rule, applied with a scratch buffer

  /// Updates one element θ with its gradient g.
  TP_HOST_DEVICE void operator()(T& theta, T g) const {
    T scratch = 0;
    rule(theta, g, scratch);
  }
};

/// Adam (Kingma & Ba 2015, Algorithm 1), with optional L2 decay λ₂ added to the gradient (as the
/// paper's f would carry it, and as PyTorch's Adam does) and optional decoupled decay λ_d (AdamW,
/// Loshchilov & Hutter 2019, Algorithm 2 line 12, with the schedule multiplier η_t folded into lr):
///   g ← g + λ₂θ
///   m ← β₁ m + (1 − β₁) g                       (Alg. 1: m_t ← β₁·m_{t−1} + (1 − β₁)·g_t)
///   v ← β₂ v + (1 − β₂) g²                      (Alg. 1: v_t ← β₂·v_{t−1} + (1 − β₂)·g_t²)
///   m̂ = m / (1 − β₁ᵗ),  v̂ = v / (1 − β₂ᵗ)       (Alg. 1: bias corrections)
///   θ ← θ·(1 − lr·λ_d) − lr·m̂ / (√v̂ + ε)        (Alg. 1: θ_t ← θ_{t−1} − α·m̂_t/(√v̂_t + ε))
/// Adam uses λ_d = 0, AdamW λ₂ = 0. `decay` holds 1 − lr·λ_d; bias1 = 1 − β₁ᵗ, bias2 = 1 − β₂ᵗ.
/// AMSGrad (Reddi et al. 2018, Algorithm 2, in PyTorch's bias-corrected form) adds a buffer v_max:
///   v_max ← max(v_max, v),   θ ← θ·(1 − lr·λ_d) − lr·m̂ / (√(v_max / (1 − β₂ᵗ)) + ε)
/// (a NaN in v carries into v_max).
template <class T>
struct AdamRule {
  ///@{
  /// the settings and this step's bias corrections, as above
  T lr, beta1, beta2, eps, l2, decay, bias1, bias2;
  ///@}

  /// Updates one element θ with its gradient g and moments m, v.
  TP_HOST_DEVICE void operator()(T& theta, T g, T& m, T& v) const {
    moments(theta, g, m, v);
    step(theta, m, v);
  }
  /// AMSGrad: the same, dividing by the running maximum v_max of v.
  TP_HOST_DEVICE void operator()(T& theta, T g, T& m, T& v, T& v_max) const {
    moments(theta, g, m, v);
    v_max = v_max > v ? v_max : v;
    step(theta, m, v_max);
  }

 private:
  TP_HOST_DEVICE void moments(const T& theta, T g, T& m, T& v) const {
    g += l2 * theta;
    m = beta1 * m + (T(1) - beta1) * g;
    v = beta2 * v + (T(1) - beta2) * g * g;
  }
  TP_HOST_DEVICE void step(T& theta, T m, T second) const {
    const T m_hat = m / bias1;
    const T v_hat = second / bias2;
    theta = theta * decay - lr * m_hat / (std::sqrt(v_hat) + eps);
  }
};

/// RAdam (Liu et al. 2020, "On the Variance of the Adaptive Learning Rate and Beyond", Algorithm 2),
/// with optional L2 decay λ₂ added to the gradient (as PyTorch's RAdam does):
///   g ← g + λ₂θ
///   v ← β₂ v + (1 − β₂) g²                      (Alg. 2: v_t ← β₂·v_{t−1} + (1 − β₂)·g_t²)
///   m ← β₁ m + (1 − β₁) g                       (Alg. 2: m_t ← β₁·m_{t−1} + (1 − β₁)·g_t)
///   m̂ = m / (1 − β₁ᵗ)                           (Alg. 2: m̂_t ← m_t/(1 − β₁ᵗ))
///   if ρ_t > 4 (PyTorch's convention: 5) (host: rectified = true, r = r_t; see radam.h):
///     θ ← θ − lr·r_t·m̂ / (√v̂ + ε),  v̂ = v / (1 − β₂ᵗ)
///       (Alg. 2: l_t ← √((1 − β₂ᵗ)/v_t);  θ_t ← θ_{t−1} − α_t·r_t·m̂_t·l_t. The paper's l_t = 1/√v̂_t
///        has no ε; we use 1/(√v̂_t + ε), ε outside the square root and after the bias correction,
///        exactly where Adam puts it. PyTorch and the authors' code add ε to √v_t before the bias
///        correction instead: √(1 − β₂ᵗ)/(√v_t + ε) = 1/(√v̂_t + ε/√(1 − β₂ᵗ)), which is this rule with
///        eps = ε/√(1 − β₂ᵗ); RAdamConvention::PyTorch passes that, and its threshold ρ_t > 5.)
///   else:
///     θ ← θ − lr·m̂                              (Alg. 2: θ_t ← θ_{t−1} − α_t·m̂_t, un-adapted momentum)
/// v is updated in both branches, so the rectified steps see the full history.
template <class T>
struct RAdamRule {
  ///@{
  /// the settings, this step's bias corrections and the rectification term r_t, as above
  T lr, beta1, beta2, eps, l2, bias1, bias2, r;
  ///@}
  bool rectified;  ///< whether ρ_t is above the threshold (the rectified branch)

  /// Updates one element θ with its gradient g and moments m, v.
  TP_HOST_DEVICE void operator()(T& theta, T g, T& m, T& v) const {
    g += l2 * theta;
    v = beta2 * v + (T(1) - beta2) * g * g;
    m = beta1 * m + (T(1) - beta1) * g;
    const T m_hat = m / bias1;
    if (rectified) {
      const T v_hat = v / bias2;
      theta -= lr * r * m_hat / (std::sqrt(v_hat) + eps);
    } else {
      theta -= lr * m_hat;
    }
  }
};

}  // namespace tapestry::optim
