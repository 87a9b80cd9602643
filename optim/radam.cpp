#include "optim/radam.h"

#include <cmath>

#include "core/dispatch.h"
#include "optim/apply_rule.h"

namespace tapestry::optim {

double radam_rho(int64_t t, double beta2) {
  TP_CHECK(t >= 1, "radam_rho", "step must be >= 1, got ", t);
  detail::check_unit_interval("radam_rho", "beta2", beta2);
  // Algorithm 2: ρ_∞ ← 2/(1 − β₂) − 1;  ρ_t ← ρ_∞ − 2tβ₂ᵗ/(1 − β₂ᵗ)
  const double rho_inf = 2.0 / (1.0 - beta2) - 1.0;
  const double beta2_t = std::pow(beta2, static_cast<double>(t));
  return rho_inf - 2.0 * static_cast<double>(t) * beta2_t / (1.0 - beta2_t);
}

double radam_rectification(int64_t t, double beta2) {
  const double rho_t = radam_rho(t, beta2);
  TP_CHECK(rho_t > 4, "radam_rectification", "r_t is defined only where rho_t > 4; rho_", t,
           " = ", rho_t, " for beta2 = ", beta2);
  // Algorithm 2: r_t ← √((ρ_t − 4)(ρ_t − 2)ρ_∞ / ((ρ_∞ − 4)(ρ_∞ − 2)ρ_t))
  const double rho_inf = 2.0 / (1.0 - beta2) - 1.0;
  return std::sqrt((rho_t - 4.0) * (rho_t - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t));
}

RAdam::RAdam(std::vector<Tensor> params, RAdamOptions options)
    : Optimizer("RAdam", std::move(params), options.lr, options.weight_decay, {"exp_avg", "exp_avg_sq"}),
      options_(options) {
  detail::check_unit_interval("RAdam", "beta1", options.betas.first);
  detail::check_unit_interval("RAdam", "beta2", options.betas.second);
  detail::check_positive("RAdam", "eps", options.eps);
  detail::check_non_negative("RAdam", "weight_decay", options.weight_decay);
}

void RAdam::update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& buffers, int64_t t,
                   const ParamGroup& group, CpuUpdates& cpu) {
  const double beta1 = options_.betas.first, beta2 = options_.betas.second;
  const double steps = static_cast<double>(t);
  // Whether the variance of the adaptive rate is tractable (Algorithm 2: "if ρ_t > 4"; PyTorch: ρ_t > 5).
  const bool pytorch = options_.convention == RAdamConvention::PyTorch;
  const bool rectified = radam_rho(t, beta2) > (pytorch ? 5.0 : 4.0);
  const double r = rectified ? radam_rectification(t, beta2) : 0.0;
  // PyTorch's √(1 − β₂ᵗ)/(√v + ε) is 1/(√v̂ + ε/√(1 − β₂ᵗ)): the rule's form with ε scaled, so both
  // conventions run the same rule (and the same fused kernel).
  const double bias2 = 1.0 - std::pow(beta2, steps);
  const double eps = pytorch ? options_.eps / std::sqrt(bias2) : options_.eps;
  visit_floating(param.dtype(), "RAdam", [&](auto tag) {
    using T = decltype(tag);
    // The rule (optim/update_rules.h): v, m, m̂ as in Adam; θ ← θ − lr·r_t·m̂/(√v̂ + ε) when
    // rectified, else θ ← θ − lr·m̂.
    const RAdamRule<T> rule{static_cast<T>(group.lr),
                            static_cast<T>(beta1),
                            static_cast<T>(beta2),
                            static_cast<T>(eps),
                            static_cast<T>(group.weight_decay),
                            static_cast<T>(1.0 - std::pow(beta1, steps)),
                            static_cast<T>(bias2),
                            static_cast<T>(r),
                            rectified};
    apply_rule<T>("RAdam", rule, cpu, param, grad, buffers[0], buffers[1]);
  });
}

}  // namespace tapestry::optim
