/// @file
/// Applying an update rule (optim/update_rules.h) to a whole parameter, on the parameter's device.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/cpu_capability.h"
#include "core/tensor.h"
#include "ops/common.h"
#include "ops/dispatch.h"
#include "optim/cuda/apply_rule.h"
#include "optim/update_rules.h"

namespace tapestry::optim {

/// rule(θ[i], g[i], buffers[i]...) for i in [begin, end). Compiled once per CPU capability below:
/// the compiler runs it in vector registers (square roots and divisions included: they round as the
/// scalar ones do, and the build never contracts a multiply and an add), the same bits on each.
template <class Rule, class T, class... Buffers>
[[gnu::always_inline]] inline void rule_range(const Rule& rule, int64_t begin, int64_t end, T* theta, const T* grad,
                                              Buffers*... buffers) {
  // A copy of the rule: read through the reference, its settings might alias the arrays written in
  // the loop, and the compiler kept the loop scalar (RAdam's, whose branch it could not then hoist).
  const Rule local = rule;
  for (int64_t i = begin; i < end; ++i) local(theta[i], grad[i], buffers[i]...);
}
/// rule_range as the baseline build compiles it.
template <class Rule, class T, class... Buffers>
void rule_range_baseline(const Rule& rule, int64_t begin, int64_t end, T* theta, const T* grad, Buffers*... buffers) {
  rule_range(rule, begin, end, theta, grad, buffers...);
}
#if TP_CPU_DISPATCH
/// rule_range compiled for AVX2 (core/cpu_capability.h).
template <class Rule, class T, class... Buffers>
TP_TARGET_AVX2 void rule_range_avx2(const Rule& rule, int64_t begin, int64_t end, T* theta, const T* grad,
                                    Buffers*... buffers) {
  rule_range(rule, begin, end, theta, grad, buffers...);
}
/// rule_range compiled for AVX-512 (core/cpu_capability.h).
template <class Rule, class T, class... Buffers>
TP_TARGET_AVX512 void rule_range_avx512(const Rule& rule, int64_t begin, int64_t end, T* theta, const T* grad,
                                        Buffers*... buffers) {
  rule_range(rule, begin, end, theta, grad, buffers...);
}
#endif

/// The CPU kernel: rule(θ[i], g[i], buffers[i]...) for every element, split across threads. Every
/// element is independent, so the result does not depend on the number of threads.
template <class Rule, class T, class... Buffers>
void cpu_apply_rule(const Rule& rule, int64_t n, T* theta, const T* grad, Buffers*... buffers) {
  auto kernel = &rule_range_baseline<Rule, T, Buffers...>;
#if TP_CPU_DISPATCH
  if (cpu_capability() == CpuCapability::Avx512) kernel = &rule_range_avx512<Rule, T, Buffers...>;
  if (cpu_capability() == CpuCapability::Avx2) kernel = &rule_range_avx2<Rule, T, Buffers...>;
#endif
  constexpr int64_t kChunk = 4096;  // elements a task
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t begin = 0; begin < n; begin += kChunk)
    kernel(rule, begin, std::min(n, begin + kChunk), theta, grad, buffers...);
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
