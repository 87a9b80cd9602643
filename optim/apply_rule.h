/// @file
/// Applying an update rule (optim/update_rules.h) to a whole parameter, on the parameter's device.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/common.h"
#include "ops/dispatch.h"
#include "optim/cuda/apply_rule.h"
#include "optim/update_rules.h"

namespace tapestry::optim {

/// The CPU kernel: rule(θ[i], g[i], buffers[i]...) for every element, split across threads. Every
/// element is independent, so the result does not depend on the number of threads.
template <class Rule, class T, class... Buffers>
void cpu_apply_rule(const Rule& rule, int64_t n, T* theta, const T* grad, Buffers*... buffers) {
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) rule(theta[i], grad[i], buffers[i]...);
}

/// rule over every element of `param` with its gradient and state buffers (all contiguous, of one
/// shape and of dtype T), on the parameter's device: the loop above on the CPU, one fused kernel on a
/// GPU (optim/cuda/apply_rule.h). `op` names the optimizer in errors.
template <class T, class Rule, class... Buffers>
void apply_rule(const char* op, const Rule& rule, const Tensor& param, const Tensor& grad,
                const Buffers&... buffers) {
  if (on_cuda(op, param, [&] { cuda::apply_rule<T>(rule, param, grad, buffers...); })) return;
  cpu_apply_rule(rule, param.numel(), param.template data<T>(), grad.template data<T>(),
                 buffers.template data<T>()...);
}

}  // namespace tapestry::optim
