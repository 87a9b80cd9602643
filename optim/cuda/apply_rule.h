// CUDA launcher of the optimizers' update (optim/cuda/apply_rule.cu). Plain C++: optim/apply_rule.h
// calls it for parameters on a GPU. It lives with optim, not with the op kernels in ops/cuda/,
// because it is compiled for optim's update rules: ops never include optim (docs/ARCHITECTURE.md).
#pragma once

#include "core/tensor.h"

namespace tapestry::cuda {

// rule(θ[i], g[i], buffers[i]...) for every element i, in place, one fused kernel over the
// parameter: param, grad and each buffer contiguous, of one shape and of dtype T, on one GPU.
// Instantiated for the rules of optim/update_rules.h (SGD without and with momentum, Adam / AdamW
// with and without AMSGrad's third buffer, RAdam) in float32 and float64. Compiled without fused
// multiply-adds, so that each operation rounds as on the CPU: the update equals the CPU's bit for bit.
template <class T, class Rule, class... Buffers>
void apply_rule(const Rule& rule, const Tensor& param, const Tensor& grad, const Buffers&... buffers);

}  // namespace tapestry::cuda
