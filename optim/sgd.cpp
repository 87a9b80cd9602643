#include "optim/sgd.h"

#include "core/dispatch.h"
#include "optim/apply_rule.h"

namespace tapestry::optim {

namespace {

std::vector<std::string> sgd_buffers(const SGDOptions& options) {
  if (options.momentum > 0) return {"momentum_buffer"};
  return {};
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer("SGD", std::move(params), options.lr, options.weight_decay, sgd_buffers(options)),
      options_(options) {
  detail::check_unit_interval("SGD", "momentum", options.momentum);
  detail::check_non_negative("SGD", "weight_decay", options.weight_decay);
  TP_CHECK(options.nesterov == Nesterov::No || options.momentum > 0, "SGD",
           "Nesterov momentum needs momentum > 0, got ", options.momentum);
}

void SGD::update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& buffers, int64_t,
                 const ParamGroup& group, CpuUpdates& cpu) {
  if (buffers.empty()) return sgd_step(param, grad, group.lr, group.weight_decay, &cpu);  // μ = 0
  visit_floating(param.dtype(), "SGD", [&](auto tag) {
    using T = decltype(tag);
    // The rule (optim/update_rules.h): g ← g + λθ;  b ← μ b + g;  θ ← θ − lr·(Nesterov ? g + μ b : b).
    const SGDRule<T> rule{static_cast<T>(group.lr), static_cast<T>(options_.momentum),
                          static_cast<T>(group.weight_decay), options_.nesterov == Nesterov::Yes};
    apply_rule<T>("SGD", rule, cpu, param, grad, buffers[0]);
  });
}

void sgd_step(const Tensor& param, const Tensor& grad, double lr, double weight_decay, CpuUpdates* cpu) {
  CpuUpdates now;
  visit_floating(param.dtype(), "SGD", [&](auto tag) {
    using T = decltype(tag);
    // μ = 0: the buffer is a per-element scratch value, so b = g and θ ← θ − lr·(g + λθ).
    const SGDRule<T> rule{static_cast<T>(lr), T(0), static_cast<T>(weight_decay), false};
    apply_rule<T>("SGD", SGDStatelessRule<T>{rule}, cpu ? *cpu : now, param, grad);
  });
  now.run();
}

}  // namespace tapestry::optim
