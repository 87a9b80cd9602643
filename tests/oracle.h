// Fused op against its composition from primitive ops: values and gradients (STYLE §5, §11).
#pragma once

#include <cmath>
#include <functional>
#include <vector>

#include "tests/testing.h"

namespace tapestry::testing {

// Like check_close, but equal infinities (a masked log-probability's −inf) also agree.
inline void check_close_or_inf(const Tensor& a, const Tensor& b, double atol, double rtol) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("element " << i << ": " << x[i] << " vs " << y[i]);
    CHECK((x[i] == y[i] || std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i])));
  }
}

struct ValueAndGradients {
  Tensor value;
  std::vector<Tensor> grads;  // per input: its gradient, zeros if it got none, undefined if not floating
};

// fn on fresh leaf clones of the floating inputs, back-propagated with the seed gradient `seed`.
inline ValueAndGradients run_backward(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                      const std::vector<Tensor>& inputs, const Tensor& seed) {
  std::vector<Tensor> leaves;
  for (const Tensor& t : inputs) {
    if (!is_floating(t.dtype())) {
      leaves.push_back(t);
      continue;
    }
    Tensor leaf = clone(t.detach());
    leaf.set_requires_grad(true);
    leaves.push_back(leaf);
  }
  ValueAndGradients out;
  out.value = fn(leaves);
  out.value.backward(seed);
  for (const Tensor& leaf : leaves) {
    if (!leaf.requires_grad()) out.grads.emplace_back();
    else out.grads.push_back(leaf.grad().defined() ? leaf.grad() : zeros_like(leaf));
  }
  return out;
}

// fused(inputs) and reference(inputs) agree in value and in the gradient of every floating input,
// for one random seed gradient (uniform in [-1, 1) from `seed`).
inline void check_matches_reference(const std::function<Tensor(const std::vector<Tensor>&)>& fused,
                                    const std::function<Tensor(const std::vector<Tensor>&)>& reference,
                                    const std::vector<Tensor>& inputs, double atol, double rtol,
                                    uint64_t seed = 99) {
  Tensor probe;
  {
    NoGradGuard no_grad;
    probe = fused(inputs);
  }
  const Tensor dy = to(uniform(probe.shape(), seed), probe.dtype());
  const ValueAndGradients a = run_backward(fused, inputs, dy), b = run_backward(reference, inputs, dy);
  {
    INFO("values");
    check_close_or_inf(a.value, b.value, atol, rtol);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!a.grads[i].defined()) continue;
    INFO("gradient of input " << i);
    check_close(a.grads[i], b.grads[i], atol, rtol);
  }
}

}  // namespace tapestry::testing
