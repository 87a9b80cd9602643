// Checks shared by the attention suites: two functions agree in values and gradients, and a
// function of (q, k, v) is causal.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tests/testing.h"

namespace tapestry::testing {

// fn's values and the gradients of its three inputs for one seeded output gradient.
inline std::vector<Tensor> value_and_gradients(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                               const std::vector<Tensor>& inputs) {
  std::vector<Tensor> leaves;
  for (const Tensor& t : inputs) leaves.push_back(clone(t).set_requires_grad(true));
  const Tensor out = fn(leaves);
  sum(out * uniform(out.shape(), 77)).backward();
  std::vector<Tensor> result{out.detach()};
  for (const Tensor& t : leaves) result.push_back(t.grad());
  return result;
}

// a and b agree in their values and in the gradients of every input.
inline void check_same_function(const std::function<Tensor(const std::vector<Tensor>&)>& a,
                                const std::function<Tensor(const std::vector<Tensor>&)>& b,
                                const std::vector<Tensor>& inputs, double atol = 1e-12, double rtol = 1e-10) {
  const std::vector<Tensor> x = value_and_gradients(a, inputs), y = value_and_gradients(b, inputs);
  for (size_t i = 0; i < x.size(); ++i) {
    const std::string what = i == 0 ? "values" : "gradient of input " + std::to_string(i - 1);
    INFO(what);
    if (i > 0 && !y[i].defined()) {
      CHECK(!x[i].defined());
      continue;
    }
    check_close(x[i], y[i], atol, rtol);
  }
}

// `fn` is causal: changing q, k and v at positions after t changes no output at positions ≤ t.
inline void check_causal(const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>& fn, int64_t N,
                         int64_t E) {
  const Tensor q = uniform({2, 2, N, E}, 60, -2, 2), k = uniform({2, 2, N, E}, 61, -2, 2), v = uniform({2, 2, N, E}, 62);
  const Tensor before = fn(q, k, v);
  for (int64_t t = 0; t + 1 < N; t += 3) {
    INFO("positions after " << t << " changed");
    const Tensor later = to(reshape(gt(arange(N, {DType::Int64}), scalar(double(t), {DType::Int64})), {1, 1, N, 1}),
                            DType::Float64);
    auto disturb = [&](const Tensor& x, uint64_t seed) { return x * (1.0 - later) + uniform(x.shape(), seed, -3, 3) * later; };
    const Tensor after = fn(disturb(q, 63 + t), disturb(k, 64 + t), disturb(v, 65 + t));
    check_close(slice(after, 2, 0, t + 1), slice(before, 2, 0, t + 1), 0.0, 0.0);
    // and the check can fail: an output after t does change
    CHECK(max(abs(slice(after, 2, t + 1, N) - slice(before, 2, t + 1, N))).item<double>() > 1e-6);
  }
}

}  // namespace tapestry::testing
