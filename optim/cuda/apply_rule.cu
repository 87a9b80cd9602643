// CUDA kernel of the optimizers: the per-element rules of optim/update_rules.h (the functors the
// CPU evaluates too) applied in one grid-stride pass over a parameter, its gradient and its state.
// Every element is independent, so the launch configuration cannot change the result.
//
// This file is compiled with --fmad=false (CMakeLists.txt): nvcc would otherwise contract a·b + c
// in the rules into fused multiply-adds, which round once where the CPU rounds twice. Without them
// every operation (+, −, ·, /, √, all correctly rounded on both devices) rounds as on the CPU, so a
// parameter updated on the GPU stays bit for bit equal to the same parameter updated on the CPU.
#include "ops/cuda/launch.cuh"
#include "optim/cuda/apply_rule.h"
#include "optim/update_rules.h"

namespace tapestry::cuda {

namespace {

template <class T, class Rule, class... Buffers>
__global__ void apply_rule_kernel(Rule rule, int64_t n, T* theta, const T* grad, Buffers*... buffers) {
  TP_GRID_STRIDE_LOOP(i, n) rule(theta[i], grad[i], buffers[i]...);
}

}  // namespace

template <class T, class Rule, class... Buffers>
void apply_rule(const Rule& rule, const Tensor& param, const Tensor& grad, const Buffers&... buffers) {
  const int64_t n = param.numel();
  if (n == 0) return;
  CudaContext& ctx = active_context(param.device());
  apply_rule_kernel<T><<<blocks_for(n), kThreads, 0, ctx.stream()>>>(rule, n, param.data<T>(), grad.data<T>(),
                                                                     buffers.template data<T>()...);
  TP_CUDA_CHECK_LAUNCH();
}

#define TP_RULES(T)                                                                                        \
  template void apply_rule<T>(const optim::SGDStatelessRule<T>&, const Tensor&, const Tensor&);             \
  template void apply_rule<T>(const optim::SGDRule<T>&, const Tensor&, const Tensor&, const Tensor&);      \
  template void apply_rule<T>(const optim::AdamRule<T>&, const Tensor&, const Tensor&, const Tensor&,      \
                              const Tensor&);                                                              \
  template void apply_rule<T>(const optim::AdamRule<T>&, const Tensor&, const Tensor&, const Tensor&,      \
                              const Tensor&, const Tensor&);                                               \
  template void apply_rule<T>(const optim::RAdamRule<T>&, const Tensor&, const Tensor&, const Tensor&,     \
                              const Tensor&);
TP_RULES(float)
TP_RULES(double)
#undef TP_RULES

}  // namespace tapestry::cuda
