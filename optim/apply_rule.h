/// @file
/// Applying an update rule (optim/update_rules.h) to a whole parameter, on the parameter's device.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <tuple>
#include <utility>
#include <vector>

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

/// rule_range as the widest CPU capability in use compiled it.
template <class Rule, class T, class... Buffers>
decltype(&rule_range_baseline<Rule, T, Buffers...>) rule_range_kernel() {
#if TP_CPU_DISPATCH
  if (cpu_capability() == CpuCapability::Avx512) return &rule_range_avx512<Rule, T, Buffers...>;
  if (cpu_capability() == CpuCapability::Avx2) return &rule_range_avx2<Rule, T, Buffers...>;
#endif
  return &rule_range_baseline<Rule, T, Buffers...>;
}

/// One optimizer step's updates on the CPU: apply_rule queues each parameter's, and Optimizer::step
/// runs them all as one parallel loop over their chunks of elements. A loop per parameter left a small
/// model's parameters each on one thread (none of the speech recogniser's 68 reaches the 32,768
/// elements worth a parallel region) and started a parallel region for each large one.
class CpuUpdates {
 public:
  /// Queues range(begin, end), to be called by run() over chunks that together cover [0, n), inside
  /// an OpenMP loop: it must not throw.
  void add(int64_t n, std::function<void(int64_t, int64_t)> range) {
    if (n > 0) queued_.push_back({n, std::move(range)});
  }

  /// Runs every queued update, split across threads, and empties the queue. Each element's update
  /// is independent of the others', so the result does not depend on the number of threads.
  void run() {
    constexpr int64_t kChunk = 4096;  // elements a task
    std::vector<std::pair<size_t, int64_t>> chunks;  // (update, its first element)
    int64_t total = 0;
    for (size_t u = 0; u < queued_.size(); ++u) {
      for (int64_t begin = 0; begin < queued_[u].n; begin += kChunk) chunks.emplace_back(u, begin);
      total += queued_[u].n;
    }
    const int64_t count = static_cast<int64_t>(chunks.size());
#pragma omp parallel for schedule(static) if (total > 32768)
    for (int64_t c = 0; c < count; ++c) {
      const auto [u, begin] = chunks[static_cast<size_t>(c)];
      queued_[u].range(begin, std::min(queued_[u].n, begin + kChunk));
    }
    queued_.clear();
  }

 private:
  struct Update {
    int64_t n;
    std::function<void(int64_t, int64_t)> range;
  };
  std::vector<Update> queued_;
};

/// T once for each of a pack's types.
template <class T, class>
using Each = T;

/// rule over every element of `param` with its gradient and state buffers (all contiguous, of one
/// shape and of dtype T), on the parameter's device: on a GPU one fused kernel now
/// (optim/cuda/apply_rule.h); on the CPU the loop above, queued in `cpu` until its run(), which reads
/// the tensors' memory then: they must live until it returns. `op` names the optimizer in errors.
template <class T, class Rule, class... Buffers>
void apply_rule(const char* op, const Rule& rule, CpuUpdates& cpu, const Tensor& param, const Tensor& grad,
                const Buffers&... buffers) {
  if (on_cuda(op, param, [&] { cuda::apply_rule<T>(rule, param, grad, buffers...); })) return;
  const auto kernel = rule_range_kernel<Rule, T, Each<T, Buffers>...>();
  T* theta = param.template data<T>();
  const T* g = grad.template data<T>();
  cpu.add(param.numel(), [kernel, rule, theta, g, data = std::make_tuple(buffers.template data<T>()...)](
                             int64_t begin, int64_t end) {
    std::apply([&](auto*... b) { kernel(rule, begin, end, theta, g, b...); }, data);
  });
}

}  // namespace tapestry::optim
