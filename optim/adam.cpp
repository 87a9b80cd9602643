#include "optim/adam.h"

#include <cmath>
#include <string>

#include "core/dispatch.h"
#include "optim/apply_rule.h"

namespace tapestry::optim {

namespace {

void check_adam_options(const char* op, double beta1, double beta2, double eps, double weight_decay) {
  detail::check_unit_interval(op, "beta1", beta1);
  detail::check_unit_interval(op, "beta2", beta2);
  detail::check_positive(op, "eps", eps);
  detail::check_non_negative(op, "weight_decay", weight_decay);
}

// One fused pass of AdamRule (optim/update_rules.h) over `param`, for step t:
//   g ← g + l2·θ;  m ← β₁m + (1 − β₁)g;  v ← β₂v + (1 − β₂)g²;
//   θ ← θ·(1 − lr·decoupled) − lr·(m / (1 − β₁ᵗ)) / (√(v / (1 − β₂ᵗ)) + ε)
// With AMSGrad the rule also keeps v_max ← max(v_max, v) in a third buffer and divides by it.
void adam_update(const char* op, const Tensor& param, const Tensor& grad, const std::vector<Tensor>& buffers,
                 int64_t t, double lr, std::pair<double, double> betas, double eps, double l2,
                 double decoupled, AmsGrad amsgrad, CpuUpdates& cpu) {
  const double beta1 = betas.first, beta2 = betas.second;
  const double steps = static_cast<double>(t);
  visit_floating(param.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const AdamRule<T> rule{static_cast<T>(lr),
                           static_cast<T>(beta1),
                           static_cast<T>(beta2),
                           static_cast<T>(eps),
                           static_cast<T>(l2),
                           static_cast<T>(1.0 - lr * decoupled),
                           static_cast<T>(1.0 - std::pow(beta1, steps)),
                           static_cast<T>(1.0 - std::pow(beta2, steps))};
    if (amsgrad == AmsGrad::Yes) apply_rule<T>(op, rule, cpu, param, grad, buffers[0], buffers[1], buffers[2]);
    else apply_rule<T>(op, rule, cpu, param, grad, buffers[0], buffers[1]);
  });
}

std::vector<std::string> adam_buffers(AmsGrad amsgrad) {
  if (amsgrad == AmsGrad::Yes) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Optimizer("Adam", std::move(params), options.lr, options.weight_decay, adam_buffers(options.amsgrad)),
      options_(options) {
  check_adam_options("Adam", options.betas.first, options.betas.second, options.eps, options.weight_decay);
}

void Adam::update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& buffers, int64_t t,
                  const ParamGroup& group, CpuUpdates& cpu) {
  adam_update("Adam", param, grad, buffers, t, group.lr, options_.betas, options_.eps, group.weight_decay, 0.0,
              options_.amsgrad, cpu);
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : Optimizer("AdamW", std::move(params), options.lr, options.weight_decay, adam_buffers(options.amsgrad)),
      options_(options) {
  check_adam_options("AdamW", options.betas.first, options.betas.second, options.eps, options.weight_decay);
}

void AdamW::update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& buffers, int64_t t,
                   const ParamGroup& group, CpuUpdates& cpu) {
  adam_update("AdamW", param, grad, buffers, t, group.lr, options_.betas, options_.eps, 0.0, group.weight_decay,
              options_.amsgrad, cpu);
}

}  // namespace tapestry::optim
