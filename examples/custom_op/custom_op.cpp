// A differentiable op written outside the library: softplus(x) = log(1 + eˣ) computed stably, with
// its backward closure recorded on the tape exactly as the library's own ops do (ops/*.cpp), then
// checked against finite differences with gradcheck and against the library's own `softplus`.
// Exits 1 when a check fails.
#include <cstdio>

#include <tapestry/tapestry.h>

using namespace tapestry;

// The forward is built from library ops, under NoGradGuard: the tape records one entry for
// custom_softplus, whose closure below is its whole derivative, rather than the entries of its pieces.
// `derivative` is σ for the real op; main() also passes a wrong one, to see gradcheck catch it.
Tensor custom_softplus_with(const Tensor& x, Tensor (*derivative)(const Tensor&)) {
  Tensor y;
  {
    NoGradGuard no_grad;
    // log(1 + eˣ) = max(x, 0) + log(1 + e^−|x|): no overflow for large |x|.
    y = add(relu(x), log(add(exp(neg(abs(x))), scalar(1.0, x.options()))));
  }
  // dx = dy ⊙ σ(x). The closure keeps x as a Saved, which refuses data changed in place since.
  record("custom_softplus", {x}, {y}, [xs = Saved(x), derivative](const std::vector<Tensor>& dy, Gradients& g) {
    if (g.needs(0)) g.accumulate(0, mul(dy[0], derivative(xs.get())));
  });
  return y;
}

Tensor custom_softplus(const Tensor& x) { return custom_softplus_with(x, sigmoid); }

int main() {
  Generator gen(7);
  // gradcheck works in float64; large values test the stable form's gradient as well.
  const Tensor x = mul(randn({4, 5}, gen, {DType::Float64}), scalar(10.0, {DType::Float64}));
  const GradcheckResult check = gradcheck([](const std::vector<Tensor>& in) { return custom_softplus(in[0]); }, {x});
  std::printf("custom_softplus gradcheck: %s (worst error %.3g)\n", check.ok ? "passed" : "FAILED", check.worst_error);
  if (!check) std::printf("%s\n", check.report.c_str());
  // A wrong derivative (tanh for σ) must fail the same check.
  const GradcheckResult wrong = gradcheck([](const std::vector<Tensor>& in) { return custom_softplus_with(in[0], tanh); }, {x});
  std::printf("with a wrong derivative: %s\n", wrong.ok ? "passed (the check is blind!)" : "failed, as it must");

  // It computes what the library's softplus computes (which, as PyTorch's, returns x itself above
  // x = 20, where log(1 + eˣ) − x < e⁻²⁰ ≈ 2e-9).
  const double gap = max(abs(sub(custom_softplus(x), softplus(x)))).item<double>();
  std::printf("largest difference from the library's softplus: %.3g\n", gap);

  // It composes with the library's ops like any other: a loss through it trains a parameter.
  Tensor w = randn({5}, gen);
  w.set_requires_grad(true);
  const Tensor loss = mean(custom_softplus(mul(rand({3, 5}, gen), w)));
  loss.backward();
  std::printf("loss %.4f, dloss/dw defined: %s\n", loss.item<float>(), w.grad().defined() ? "yes" : "no");
  return check.ok && !wrong.ok && gap < 1e-8 && w.grad().defined() ? 0 : 1;
}
