// Elementwise ops (ops/elementwise.h): forward values against <cmath>, gradients by gradcheck
// (broadcasting, non-contiguous views, size-1, 0-d and empty shapes), comparisons, integer
// arithmetic, where / masked_fill, in-place ops and bad input.
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <string>

#include "ops/loops.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

using Inputs = std::vector<Tensor>;
using UnaryOp = std::function<Tensor(const Tensor&)>;
using BinaryOp = std::function<Tensor(const Tensor&, const Tensor&)>;

Tensor f64(const std::vector<double>& values, const Shape& shape) { return from_vector<double>(values, shape); }

// x with every element closer than `margin` to one of `points` pushed `margin` away from it, so
// that central differences never straddle a kink (relu and abs at 0, clamp at its bounds).
Tensor avoiding(const Tensor& x, const std::vector<double>& points, double margin = 0.05) {
  std::vector<double> v = x.to_vector<double>();
  for (double& e : v)
    for (double p : points)
      if (std::abs(e - p) < margin) e = e < p ? p - margin : p + margin;
  return f64(v, x.shape());
}

// A bool tensor of `shape`, true with probability 1/2, from a fixed seed.
Tensor random_mask(const Shape& shape, uint64_t seed) {
  std::vector<double> u = uniform(shape, seed, 0, 1).to_vector<double>();
  std::vector<bool> mask;
  for (double e : u) mask.push_back(e < 0.5);
  return from_vector<bool>(mask, shape);
}

struct UnaryCase {
  const char* name;
  UnaryOp op;
  double (*reference)(double);
  double lo, hi;               // the input range that gradcheck draws from
  std::vector<double> kinks;   // points where the op is not differentiable
};

std::vector<UnaryCase> unary_cases() {
  return {
      {"neg", [](const Tensor& x) { return neg(x); }, [](double x) { return -x; }, -2, 2, {}},
      {"unary operator-", [](const Tensor& x) { return -x; }, [](double x) { return -x; }, -2, 2, {}},
      {"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, -2, 2, {}},
      {"log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }, 0.5, 2, {}},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, 0.5, 2, {}},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }, 0.5, 2, {}},
      {"pow 3", [](const Tensor& x) { return pow(x, 3.0); }, [](double x) { return x * x * x; }, -2, 2, {}},
      {"pow -1.5", [](const Tensor& x) { return pow(x, -1.5); }, [](double x) { return std::pow(x, -1.5); }, 0.5, 2, {}},
      {"pow 0.5", [](const Tensor& x) { return pow(x, 0.5); }, [](double x) { return std::sqrt(x); }, 0.5, 2, {}},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double x) { return std::abs(x); }, -2, 2, {0}},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, -2, 2, {}},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, [](double x) { return 1 / (1 + std::exp(-x)); }, -3, 3, {}},
      {"relu", [](const Tensor& x) { return relu(x); }, [](double x) { return x > 0 ? x : 0.0; }, -2, 2, {0}},
      {"gelu", [](const Tensor& x) { return gelu(x); },
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, -3, 3, {}},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.7); },
       [](double x) { return std::min(0.7, std::max(-0.5, x)); }, -1.5, 1.5, {-0.5, 0.7}},
      {"log1p", [](const Tensor& x) { return log1p(x); }, [](double x) { return std::log1p(x); }, 0.001, 2, {}},
      {"expm1", [](const Tensor& x) { return expm1(x); }, [](double x) { return std::expm1(x); }, -2, 2, {}},
      {"sin", [](const Tensor& x) { return sin(x); }, [](double x) { return std::sin(x); }, -4, 4, {}},
      {"cos", [](const Tensor& x) { return cos(x); }, [](double x) { return std::cos(x); }, -4, 4, {}},
      {"silu", [](const Tensor& x) { return silu(x); }, [](double x) { return x / (1 + std::exp(-x)); }, -4, 4, {}},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x); }, [](double x) { return x > 0 ? x : 0.01 * x; },
       -2, 2, {0}},
      {"leaky_relu 0.2", [](const Tensor& x) { return leaky_relu(x, 0.2); },
       [](double x) { return x > 0 ? x : 0.2 * x; }, -2, 2, {0}},
      {"softplus", [](const Tensor& x) { return softplus(x); }, [](double x) { return std::log1p(std::exp(x)); },
       -4, 4, {}},
      // βx > threshold (x > 1.5) switches to x itself.
      {"softplus beta=2 threshold=3", [](const Tensor& x) { return softplus(x, 2, 3); },
       [](double x) { return 2 * x > 3 ? x : std::log1p(std::exp(2 * x)) / 2; }, -2, 3, {1.5}},
  };
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Unary ops

TEST_CASE("unary ops compute what <cmath> computes, in float64 and float32") {
  const std::vector<double> any = {-3.5, -1.0, -0.25, 0.0, 0.5, 1.0, 4.0};
  const std::vector<double> positive = {0.01, 0.25, 1.0, 2.0, 9.0, 100.0};
  for (const UnaryCase& c : unary_cases()) {
    INFO("op: " << c.name);
    const std::vector<double>& values = c.lo > 0 ? positive : any;
    for (DType dtype : {DType::Float64, DType::Float32}) {
      INFO("dtype: " << dtype);
      const Tensor x = to(f64(values, {static_cast<int64_t>(values.size())}), dtype);
      const Tensor y = c.op(x);
      CHECK(y.dtype() == dtype);
      CHECK(y.shape() == x.shape());
      const std::vector<double> got = y.to_vector<double>(), input = x.to_vector<double>();
      const double tol = dtype == DType::Float64 ? 1e-14 : 2e-7;
      for (size_t i = 0; i < got.size(); ++i) {
        const double want = c.reference(input[i]);
        INFO("x = " << input[i] << ": got " << got[i] << ", want " << want);
        CHECK(std::abs(got[i] - want) <= tol + tol * std::abs(want));
      }
    }
  }
}

TEST_CASE("sigmoid, tanh and exp stay finite (or saturate) at large |x|") {
  const Tensor x = f64({-800, -40, 40, 800}, {4});
  check_close(sigmoid(x), f64({0, 1 / (1 + std::exp(40.0)), 1 / (1 + std::exp(-40.0)), 1}, {4}), 0, 1e-14);
  check_close(sigmoid(to(x, DType::Float32)), f64({0, 0, 1, 1}, {4}), 1e-7, 0);
  check_close(tanh(x), f64({-1, -1, 1, 1}, {4}));
  check_close(exp(f64({-1000}, {1})), f64({0}, {1}));
  check_close(relu(f64({-2, 3}, {2})), f64({0, 3}, {2}));
}

TEST_CASE("unary ops: gradients on contiguous, non-contiguous, size-1, 0-d and empty inputs") {
  for (const UnaryCase& c : unary_cases()) {
    INFO("op: " << c.name);
    auto input = [&c](const Shape& shape, uint64_t seed) {
      return avoiding(uniform(shape, seed, c.lo, c.hi), c.kinks);
    };
    const UnaryOp op = c.op;
    check_gradients([op](const Inputs& in) { return op(in[0]); }, {input({3, 4}, 1)});
    // A transposed view (strides (1, 3)) and every other column of a (3, 8) tensor.
    check_gradients([op](const Inputs& in) { return op(transpose(in[0], 0, 1)); }, {input({3, 4}, 2)});
    check_gradients([op](const Inputs& in) { return op(slice(in[0], 1, 1, 8, 2)); }, {input({3, 8}, 3)});
    check_gradients([op](const Inputs& in) { return op(in[0]); }, {input({1, 3, 1}, 4)});
    check_gradients([op](const Inputs& in) { return op(in[0]); }, {input({}, 5)});
    for (const Shape& shape : {Shape{0}, Shape{2, 0, 3}}) {
      INFO("shape " << to_string(shape));
      const Tensor x = input(shape, 6);
      CHECK(op(x).shape() == shape);
      check_gradients([op](const Inputs& in) { return op(in[0]); }, {x});
    }
  }
}

TEST_CASE("log1p and expm1 keep their accuracy where 1 + x rounds to 1") {
  // log1p(x) = x − x²/2 + ..., expm1(x) = x + x²/2 + ...: at 1e-10 both are x to 1e-20 relative.
  check_close(log1p(f64({1e-10, -1e-12}, {2})), f64({1e-10 - 0.5e-20, -1e-12 - 0.5e-24}, {2}), 0, 1e-15);
  check_close(expm1(f64({1e-10, -1e-12}, {2})), f64({1e-10 + 0.5e-20, -1e-12 + 0.5e-24}, {2}), 0, 1e-15);
  // log(1 + 1e-10) computed naively is off by ~1e-7 relative; log1p is not.
  CHECK(std::abs(log(f64({1e-10}, {1}) + 1.0).item<double>() - 1e-10) > 1e-18);
}

TEST_CASE("softplus follows x beyond its threshold and stays finite where e^x overflows") {
  check_close(softplus(f64({800, -800}, {2})), f64({800, 0}, {2}));
  check_close(softplus(to(f64({100}, {1}), DType::Float32)), f64({100}, {1}));
}

TEST_CASE("maximum and minimum: values, integers, ties share the gradient") {
  const Tensor a = f64({1, 5, -2, 3}, {4}), b = f64({2, 4, -2, 3}, {4});
  check_close(maximum(a, b), f64({2, 5, -2, 3}, {4}));
  check_close(minimum(a, b), f64({1, 4, -2, 3}, {4}));
  CHECK(maximum(from_vector<int64_t>({1, 7}, {2}), from_vector<int64_t>({3, 2}, {2})).to_vector<int64_t>() ==
        std::vector<int64_t>{3, 7});
  CHECK(minimum(from_vector<int32_t>({1, 7}, {2}), from_vector<int32_t>({3, 2}, {2})).to_vector<int32_t>() ==
        std::vector<int32_t>{1, 2});
  // Broadcasting: a (2, 1) column against a (3,) row.
  check_close(maximum(f64({0, 10}, {2, 1}), f64({-1, 5, 20}, {3})), f64({0, 5, 20, 10, 10, 20}, {2, 3}));
  Tensor x = f64({1, 5, -2, 3}, {4}), y = f64({2, 4, -2, 3}, {4});
  x.set_requires_grad(true);
  y.set_requires_grad(true);
  sum(maximum(x, y)).backward();
  check_close(x.grad(), f64({0, 1, 0.5, 0.5}, {4}));
  check_close(y.grad(), f64({1, 0, 0.5, 0.5}, {4}));
}

TEST_CASE("clamp with tensor bounds: values, broadcasting, lo > hi gives hi, gradients to each side") {
  const Tensor x = f64({-3, -0.5, 0.5, 3}, {4});
  const Tensor lo = f64({-1, 0, 0, -1}, {4}), hi = f64({1, 1, 0.25, 2}, {4});
  check_close(clamp(x, lo, hi), f64({-1, 0, 0.25, 2}, {4}));
  // 0-d bounds broadcast; they agree with the double overload.
  check_close(clamp(x, scalar(-1.0, {DType::Float64}), scalar(1.0, {DType::Float64})), clamp(x, -1, 1));
  // lo > hi: every element is hi (min(max(x, lo), hi)).
  check_close(clamp(x, scalar(2.0, {DType::Float64}), scalar(1.0, {DType::Float64})), f64({1, 1, 1, 1}, {4}));
  // Gradients by gradcheck, away from the bounds: x inside, below and above, bounds broadcast.
  check_gradients([](const Inputs& in) { return clamp(in[0], in[1], in[2]); },
                  {f64({-3, -0.5, 0.5, 3, 0.1, -0.2}, {2, 3}), f64({-1, 0, -0.5}, {3}), f64({1.5, 0.3}, {2, 1})});
  check_gradients([](const Inputs& in) { return clamp(in[0], in[1], in[2]); },
                  {f64({0.5, 1.5}, {2}), f64({2, 2}, {2}), f64({1, 1}, {2})});  // lo > hi
  // At a bound, x keeps the gradient (lo ≤ x ≤ hi), as in the double overload.
  Tensor at = f64({-1, 1}, {2});
  at.set_requires_grad(true);
  sum(clamp(at, scalar(-1.0, {DType::Float64}), scalar(1.0, {DType::Float64}))).backward();
  check_close(at.grad(), f64({1, 1}, {2}));
}

TEST_CASE("the new ops reject bad arguments, naming the op, the shapes and the dtypes") {
  const Tensor x = zeros({2, 3}, {DType::Float64});
  check_error([&] { maximum(x, zeros({4}, {DType::Float64})); }, {"maximum: ", "(2, 3)", "(4,)", "cannot be broadcast"});
  check_error([&] { minimum(x, zeros({2, 3})); }, {"minimum: ", "dtype mismatch", "float64", "float32"});
  check_error([&] { clamp(x, zeros({4}, {DType::Float64}), x); }, {"clamp: ", "(2, 3)", "(4,)", "cannot be broadcast"});
  check_error([&] { clamp(x, x, zeros({2, 3})); }, {"clamp: ", "dtype mismatch", "float64", "float32"});
  check_error([&] { clamp(zeros({2}, {DType::Int64}), zeros({2}, {DType::Int64}), zeros({2}, {DType::Int64})); },
              {"clamp", "floating", "int64"});
  check_error([&] { leaky_relu(x, std::nan("")); }, {"leaky_relu", "finite negative_slope"});
  check_error([&] { softplus(x, 0.0); }, {"softplus", "beta > 0", "beta=0"});
}

TEST_CASE("the derivative at a kink is the documented one-sided choice") {
  Tensor x = f64({0, 0, -0.5, 0.7}, {4});
  x.set_requires_grad(true);
  // relu'(0) = 0, abs'(0) = 0, clamp passes the gradient at its bounds (lo ≤ x ≤ hi).
  sum(relu(slice(x, 0, 0, 1)) + abs(slice(x, 0, 1, 2))).backward();
  check_close(x.grad(), f64({0, 0, 0, 0}, {4}));
  x.zero_grad();
  sum(clamp(x, -0.5, 0.7)).backward();
  check_close(x.grad(), f64({1, 1, 1, 1}, {4}));
}

// ---------------------------------------------------------------------------------------------
// Binary ops

TEST_CASE("binary ops broadcast and compute the right values") {
  const Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = f64({2, 4, 8}, {3});
  check_close(add(a, b), f64({3, 6, 11, 6, 9, 14}, {2, 3}));
  check_close(sub(a, b), f64({-1, -2, -5, 2, 1, -2}, {2, 3}));
  check_close(mul(a, b), f64({2, 8, 24, 8, 20, 48}, {2, 3}));
  check_close(div(a, b), f64({0.5, 0.5, 0.375, 2, 1.25, 0.75}, {2, 3}));
  check_close(pow(a, b), f64({1, 16, 6561, 16, 625, 1679616}, {2, 3}));
  // (2, 1) against (3,) broadcasts to (2, 3); a 0-d operand broadcasts to anything.
  check_close(add(f64({10, 20}, {2, 1}), b), f64({12, 14, 18, 22, 24, 28}, {2, 3}));
  check_close(mul(a, scalar(2.0, {DType::Float64})), a * 2.0);
  CHECK(add(scalar(1.0, {DType::Float64}), scalar(2.0, {DType::Float64})).shape() == Shape{});
  // The double overloads take the tensor's dtype.
  check_close(2.0 - a, f64({1, 0, -1, -2, -3, -4}, {2, 3}));
  check_close(12.0 / a, f64({12, 6, 4, 3, 2.4, 2}, {2, 3}));
  check_close(a + 0.5, f64({1.5, 2.5, 3.5, 4.5, 5.5, 6.5}, {2, 3}));
  check_close(1.0 + a * 3.0 - 4.0 / 2.0, a * 3.0 - 1.0);
  CHECK((to(a, DType::Float32) * 2.0).dtype() == DType::Float32);
  // pow against std::pow with fractional and negative exponents
  const Tensor base = f64({0.5, 2, 3}, {3}), exponent = f64({-1.5, 0.25, 3.5}, {3});
  check_close(pow(base, exponent),
              f64({std::pow(0.5, -1.5), std::pow(2.0, 0.25), std::pow(3.0, 3.5)}, {3}), 0, 1e-15);
}

TEST_CASE("binary ops read non-contiguous operands") {
  const Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor at = transpose(a, 0, 1);  // (3, 2), strides (1, 3)
  check_close(add(at, f64({10, 20}, {2})), f64({11, 24, 12, 25, 13, 26}, {3, 2}));
  const Tensor every_other = slice(f64({1, 2, 3, 4, 5, 6}, {6}), 0, 0, 6, 2);  // 1, 3, 5
  check_close(mul(every_other, every_other), f64({1, 9, 25}, {3}));
}

namespace {

struct BinaryCase {
  const char* name;
  BinaryOp op;
  double a_lo, a_hi, b_lo, b_hi;
  std::vector<double> b_kinks;
};

std::vector<BinaryCase> binary_cases() {
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, -1, 1, -1, 1, {}},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, -1, 1, -1, 1, {}},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, -1, 1, -1, 1, {}},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, -1, 1, -2, 2, {0}},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, 0.5, 2, -1.5, 1.5, {}},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, -1, 1, -1, 1, {}},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, -1, 1, -1, 1, {}},
      {"operators", [](const Tensor& a, const Tensor& b) { return (a + b) * a - a / b; }, -1, 1, -2, 2, {0}},
  };
}

}  // namespace

TEST_CASE("binary ops: gradients with broadcasting, non-contiguous, size-1, 0-d and empty operands") {
  for (const BinaryCase& c : binary_cases()) {
    INFO("op: " << c.name);
    auto a_input = [&c](const Shape& shape, uint64_t seed) { return uniform(shape, seed, c.a_lo, c.a_hi); };
    auto b_input = [&c](const Shape& shape, uint64_t seed) {
      return avoiding(uniform(shape, seed, c.b_lo, c.b_hi), c.b_kinks, 0.5);
    };
    const BinaryOp op = c.op;
    auto plain = [op](const Inputs& in) { return op(in[0], in[1]); };
    const std::vector<std::pair<Shape, Shape>> shapes = {
        {{3, 4}, {3, 4}}, {{3, 1, 4}, {2, 4}}, {{2, 3}, {}}, {{}, {2, 3}}, {{1}, {2, 3}},
        {{2, 1}, {1, 3}}, {{1, 1}, {1, 1}}};
    uint64_t seed = 10;
    for (const auto& [sa, sb] : shapes) {
      INFO("shapes " << to_string(sa) << " and " << to_string(sb));
      check_gradients(plain, {a_input(sa, seed), b_input(sb, seed + 1)});
      seed += 2;
    }
    // Non-contiguous operands: a transposed (3, 4) against every other row of a (6, 4), and a
    // transposed operand broadcast against a column.
    check_gradients([op](const Inputs& in) { return op(transpose(in[0], 0, 1), slice(in[1], 0, 0, 6, 2)); },
                    {a_input({4, 3}, 30), b_input({6, 4}, 31)});
    check_gradients([op](const Inputs& in) { return op(transpose(in[0], 0, 1), transpose(in[1], 0, 1)); },
                    {a_input({4, 3}, 32), b_input({1, 3}, 33)});
    // The same tensor on both sides: the two gradients add up.
    check_gradients([op](const Inputs& in) { return op(in[0], in[0]); },
                    {avoiding(uniform({2, 3}, 34, std::max(c.a_lo, c.b_lo), std::min(c.a_hi, c.b_hi)), c.b_kinks, 0.5)});
    // Empty: the forward has the broadcast shape, the backward runs.
    const std::vector<std::tuple<Shape, Shape, Shape>> empty = {
        {{0, 4}, {4}, {0, 4}}, {{2, 0}, {2, 1}, {2, 0}}, {{0}, {}, {0}}, {{1, 3}, {0, 1}, {0, 3}}};
    for (const auto& [sa, sb, sy] : empty) {
      INFO("shapes " << to_string(sa) << " and " << to_string(sb));
      const Tensor a = a_input(sa, 40), b = b_input(sb, 41);
      CHECK(op(a, b).shape() == sy);
      check_gradients(plain, {a, b});
    }
  }
}

TEST_CASE("pow: finite gradients where the base is 0") {
  Tensor x = f64({0, 0, 2}, {3});
  x.set_requires_grad(true);
  // x⁰ is constant: its gradient is 0 everywhere, also at x = 0 (not 0 · 0⁻¹ = NaN).
  sum(pow(x, 0.0)).backward();
  check_close(x.grad(), f64({0, 0, 0}, {3}), 0, 0);
  x.zero_grad();
  sum(pow(x, 2.0)).backward();
  check_close(x.grad(), f64({0, 0, 4}, {3}), 0, 0);
  // d/db a^b = a^b ln a: 0 at a = 0 (for b ≥ 0), not 0 · ln 0 = NaN; d/da a⁰ = 0.
  Tensor a = f64({0, 0, 0, 2}, {4}), b = f64({1.5, 2, 0, 3}, {4});
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  sum(pow(a, b)).backward();
  check_close(a.grad(), f64({0, 0, 0, 12}, {4}), 0, 1e-15);
  check_close(b.grad(), f64({0, 0, 0, 8 * std::log(2.0)}, {4}), 0, 1e-15);
  // And the exponent's gradient checked numerically at a = 0.
  check_gradients([](const Inputs& in) { return pow(f64({0, 0}, {2}), in[0]); }, {f64({0.5, 2}, {2})});
}

TEST_CASE("ops with one constant operand differentiate the other") {
  const Tensor c = f64({0.5, -2, 3}, {3});
  check_gradients([c](const Inputs& in) { return mul(in[0], c) + div(c, in[0]) - pow(in[0], c); },
                  {uniform({2, 3}, 80, 0.5, 2)});
  // the constant on the other side (each op keeps only what the wanted gradient reads)
  check_gradients([c](const Inputs& in) { return mul(c, in[0]) + div(in[0], c) - pow(abs(c), in[0]); },
                  {uniform({2, 3}, 82, 0.5, 2)});
  check_gradients([c](const Inputs& in) { return maximum(in[0], c) + minimum(c, in[0]); }, {uniform({2, 3}, 83, -3, 3)});
  check_gradients([c](const Inputs& in) { return where(gt(c, f64({0}, {1})), in[0], c); }, {uniform({3}, 81)});
}

TEST_CASE("elementwise ops on tensors larger than one parallel chunk, broadcast and strided") {
  // 37 × 1001 elements: several chunks of the CPU loop, with runs split mid-row.
  const Tensor a = uniform({1001, 37}, 90), b = uniform({37, 1}, 91);
  const Tensor y = add(transpose(a, 0, 1), b) * transpose(a, 0, 1);
  REQUIRE(y.shape() == Shape{37, 1001});
  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>(), yv = y.to_vector<double>();
  int64_t wrong = 0;
  for (int64_t i = 0; i < 37; ++i)
    for (int64_t j = 0; j < 1001; ++j) {
      const double aij = av[j * 37 + i];
      wrong += yv[i * 1001 + j] != (aij + bv[i]) * aij;
    }
  CHECK(wrong == 0);
  // The same through a non-contiguous output: an in-place op on a transposed view.
  NoGradGuard no_grad;
  const Tensor z = clone(a);
  add_(transpose(z, 0, 1), b);
  const std::vector<double> zv = z.to_vector<double>();
  wrong = 0;
  for (int64_t j = 0; j < 1001; ++j)
    for (int64_t i = 0; i < 37; ++i) wrong += zv[j * 37 + i] != av[j * 37 + i] + bv[i];
  CHECK(wrong == 0);
}

// ---------------------------------------------------------------------------------------------
// Comparisons and integer arithmetic

TEST_CASE("comparisons produce bool tensors, broadcast, and carry no gradient") {
  const Tensor a = f64({1, 2, 3, 4}, {4});
  const Tensor two = f64({2}, {1});
  const std::vector<std::pair<Tensor, std::vector<bool>>> cases = {
      {eq(a, two), {false, true, false, false}}, {ne(a, two), {true, false, true, true}},
      {lt(a, two), {true, false, false, false}}, {le(a, two), {true, true, false, false}},
      {gt(a, two), {false, false, true, true}},  {ge(a, two), {false, true, true, true}}};
  for (const auto& [y, want] : cases) {
    CHECK(y.dtype() == DType::Bool);
    CHECK(y.shape() == Shape{4});
    CHECK(y.to_vector<bool>() == want);
  }
  // (2, 1) against (3,) in int64, and bool against bool.
  const Tensor rows = from_vector<int64_t>({1, 3}, {2, 1});
  const Tensor cols = from_vector<int64_t>({1, 2, 3}, {3});
  const Tensor less = lt(rows, cols);
  CHECK(less.shape() == Shape{2, 3});
  CHECK(less.to_vector<bool>() == std::vector<bool>{false, true, true, false, false, false});
  const Tensor flags = from_vector<bool>({true, false}, {2});
  CHECK(eq(flags, from_vector<bool>({true, true}, {2})).to_vector<bool>() == std::vector<bool>{true, false});
  // Non-contiguous operands.
  const Tensor m = f64({1, 5, 2, 6}, {2, 2});
  CHECK(gt(transpose(m, 0, 1), m).to_vector<bool>() == std::vector<bool>{false, false, true, false});
  // Inputs that require grad: the result is a plain bool tensor.
  Tensor x = f64({1, 2}, {2});
  x.set_requires_grad(true);
  CHECK_FALSE(lt(x, two).requires_grad());
  CHECK(eq(zeros({0, 3}), zeros({3})).shape() == Shape{0, 3});
}

TEST_CASE("integer tensors add, subtract and multiply exactly; floating-only ops refuse them") {
  const Tensor a = from_vector<int64_t>({1, -2, 3000000000LL}, {3});
  const Tensor b = from_vector<int64_t>({4, 5, 3}, {3});
  CHECK(add(a, b).dtype() == DType::Int64);
  CHECK(add(a, b).to_vector<int64_t>() == std::vector<int64_t>{5, 3, 3000000003LL});
  CHECK(sub(a, b).to_vector<int64_t>() == std::vector<int64_t>{-3, -7, 2999999997LL});
  CHECK(mul(a, b).to_vector<int64_t>() == std::vector<int64_t>{4, -10, 9000000000LL});
  CHECK((a * 2.0).to_vector<int64_t>() == std::vector<int64_t>{2, -4, 6000000000LL});
  CHECK(neg(a).to_vector<int64_t>() == std::vector<int64_t>{-1, 2, -3000000000LL});
  CHECK(abs(a).to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3000000000LL});
  const Tensor c = from_vector<int32_t>({7, -8}, {2});
  CHECK(add(c, from_vector<int32_t>({1}, {1})).dtype() == DType::Int32);
  CHECK(mul(c, c).to_vector<int32_t>() == std::vector<int32_t>{49, 64});
  CHECK(div(from_vector<int64_t>({7, 9}, {2}), from_vector<int64_t>({2, 3}, {2})).to_vector<int64_t>() ==
        std::vector<int64_t>{3, 3});
  // A zero divisor would trap the CPU (SIGFPE): it is refused instead.
  check_error([] { div(from_vector<int64_t>({1, 2}, {2}), from_vector<int64_t>({1, 0}, {2})); },
              {"div", "integer division by zero"});
  check_error([] { from_vector<int32_t>({1}, {1}) / 0.0; }, {"div", "integer division by zero"});
  // The one overflowing quotient, min / −1, would trap too: it wraps to min.
  const int64_t lowest = std::numeric_limits<int64_t>::min();
  CHECK(div(from_vector<int64_t>({lowest, 6}, {2}), from_vector<int64_t>({-1}, {1})).to_vector<int64_t>() ==
        std::vector<int64_t>{lowest, -6});
  // Overflow wraps as two's complement (ops/elementwise.h), on every integer op; it used to be
  // undefined behaviour.
  const int64_t highest = std::numeric_limits<int64_t>::max();
  const Tensor extremes = from_vector<int64_t>({lowest, highest}, {2});
  CHECK(neg(extremes).to_vector<int64_t>() == std::vector<int64_t>{lowest, lowest + 1});
  CHECK(abs(extremes).to_vector<int64_t>() == std::vector<int64_t>{lowest, highest});
  CHECK(add(extremes, from_vector<int64_t>({-1, 1}, {2})).to_vector<int64_t>() == std::vector<int64_t>{highest, lowest});
  CHECK(sub(extremes, from_vector<int64_t>({1, -1}, {2})).to_vector<int64_t>() == std::vector<int64_t>{highest, lowest});
  CHECK(mul(from_vector<int64_t>({int64_t{1} << 62, highest}, {2}), from_vector<int64_t>({4, 2}, {2})).to_vector<int64_t>() ==
        std::vector<int64_t>{0, -2});
  CHECK(sum(extremes + extremes).item<int64_t>() == -2);
  CHECK(sum(from_vector<int64_t>({highest, 1}, {2})).item<int64_t>() == lowest);
  const int32_t low32 = std::numeric_limits<int32_t>::min();
  CHECK(neg(from_vector<int32_t>({low32}, {1})).item<int32_t>() == low32);
  CHECK(mul(from_vector<int32_t>({65536}, {1}), from_vector<int32_t>({65536}, {1})).item<int32_t>() == 0);
  // Floating division by zero is IEEE: inf.
  CHECK(std::isinf(div(f64({1}, {1}), f64({0}, {1})).item<double>()));

  const Tensor i = from_vector<int64_t>({1, 2}, {2});
  for (const UnaryCase& u : unary_cases()) {
    if (std::string(u.name) == "neg" || std::string(u.name) == "abs" || std::string(u.name) == "unary operator-") continue;
    INFO("op: " << u.name);
    const std::string op = std::string(u.name).substr(0, std::string(u.name).find(' '));  // "pow 3": pow
    check_error([&] { u.op(i); }, {op + ": ", "expected a floating tensor", "int64", "(2,)"});
  }
  check_error([&] { exp(i); }, {"exp", "floating", "int64", "(2,)"});
  check_error([&] { pow(i, i); }, {"pow", "floating", "int64"});
  check_error([&] { neg(from_vector<bool>({true}, {1})); }, {"neg", "bool"});
  check_error([&] { add(from_vector<bool>({true}, {1}), from_vector<bool>({true}, {1})); }, {"add", "bool"});
}

// ---------------------------------------------------------------------------------------------
// where and masked_fill

TEST_CASE("where picks elementwise and broadcasts all three operands") {
  const Tensor cond = from_vector<bool>({true, false, true}, {3});
  const Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = f64({-1, -2}, {2, 1});
  const Tensor y = where(cond, a, b);
  CHECK(y.shape() == Shape{2, 3});
  check_close(y, f64({1, -1, 3, 4, -2, 6}, {2, 3}));
  CHECK(where(cond, from_vector<int64_t>({1, 2, 3}, {3}), from_vector<int64_t>({0}, {1})).to_vector<int64_t>() ==
        std::vector<int64_t>{1, 0, 3});
  CHECK(where(from_vector<bool>({}, {0}), zeros({0}), zeros({1})).shape() == Shape{0});
}

TEST_CASE("where over a mask of rows equals where over the same mask written out, in every dtype") {
  // ops/elementwise.cpp copies or fills a run whose condition is one value; the mask written out
  // element by element takes the element-by-element loop. Rows of 70 over 64 × 300: runs split
  // among the threads; a strided side, a scalar side, and a side broadcast along the rows.
  const Tensor rows = random_mask({64, 300, 1}, 80);
  const Tensor each = contiguous(expand(rows, {64, 300, 70}));
  const Tensor wide = transpose(uniform({64, 70, 300}, 81, -3, 3), 1, 2);  // (64, 300, 70), strided runs
  for (DType dtype : {DType::Float32, DType::Float64, DType::BFloat16, DType::Int64, DType::Bool}) {
    INFO(dtype);
    const Tensor a = to(wide, dtype), scalar = to(uniform({}, 82, -3, 3), dtype);
    const Tensor row = to(uniform({70}, 83, -3, 3), dtype);
    for (const auto& [x, y] : std::vector<std::pair<Tensor, Tensor>>{{a, scalar}, {scalar, a}, {row, a}, {a, row}}) {
      CHECK(to(where(rows, x, y), DType::Float64).to_vector<double>() ==
            to(where(each, x, y), DType::Float64).to_vector<double>());
    }
  }
}

TEST_CASE("where: gradients flow to the chosen side, summed over broadcast dims") {
  const Tensor cond = random_mask({3, 1}, 50);
  auto fn = [](const Inputs& in) { return where(in[0], in[1], in[2]); };
  check_gradients(fn, {random_mask({3, 4}, 51), uniform({3, 4}, 52), uniform({3, 4}, 53)});
  check_gradients(fn, {cond, uniform({3, 4}, 54), uniform({4}, 55)});
  check_gradients(fn, {random_mask({4}, 56), uniform({3, 1}, 57), uniform({}, 58)});
  check_gradients([](const Inputs& in) { return where(in[0], transpose(in[1], 0, 1), slice(in[2], 1, 0, 8, 2)); },
                  {random_mask({3, 4}, 59), uniform({4, 3}, 60), uniform({3, 8}, 61)});
  check_gradients(fn, {random_mask({0, 4}, 62), uniform({0, 4}, 63), uniform({4}, 64)});
  // Explicit values: da = dy ⊙ [cond], db = dy ⊙ [¬cond] summed to b's shape.
  Tensor a = f64({1, 2, 3}, {3}), b = f64({0}, {1});
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  sum(where(from_vector<bool>({true, false, false}, {3}), a, b) * f64({1, 10, 100}, {3})).backward();
  check_close(a.grad(), f64({1, 0, 0}, {3}));
  check_close(b.grad(), f64({110}, {1}));
}

TEST_CASE("masked_fill writes the value where the mask is true and passes gradients elsewhere") {
  const Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  check_close(masked_fill(x, from_vector<bool>({false, true, false}, {3}), -9),
              f64({1, -9, 3, 4, -9, 6}, {2, 3}));
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(masked_fill(x, from_vector<bool>({true, false}, {2, 1}), -inf).to_vector<double>() ==
        std::vector<double>{-inf, -inf, -inf, 4, 5, 6});
  CHECK(masked_fill(from_vector<int64_t>({1, 2}, {2}), from_vector<bool>({true, false}, {2}), 7).to_vector<int64_t>() ==
        std::vector<int64_t>{7, 2});
  check_gradients([](const Inputs& in) { return masked_fill(in[0], in[1], 2.5); },
                  {uniform({3, 4}, 70), random_mask({4}, 71)});
  check_gradients([](const Inputs& in) { return masked_fill(transpose(in[0], 0, 1), in[1], 2.5); },
                  {uniform({4, 3}, 72), random_mask({3, 1}, 73)});
  check_gradients([](const Inputs& in) { return masked_fill(in[0], in[1], 2.5); },
                  {uniform({2, 0}, 74), random_mask({1, 0}, 75)});
}

// ---------------------------------------------------------------------------------------------
// In-place ops

TEST_CASE("in-place ops write through views, convert dtypes and refuse what they cannot do") {
  NoGradGuard no_grad;
  const Tensor x = zeros({2, 3}, {DType::Float64});
  add_(x, f64({1, 2, 3}, {3}));
  check_close(x, f64({1, 2, 3, 1, 2, 3}, {2, 3}));
  mul_(slice(x, 1, 0, 3, 2), 10.0);  // columns 0 and 2
  check_close(x, f64({10, 2, 30, 10, 2, 30}, {2, 3}));
  fill_(select(x, 0, 1), -1);
  check_close(x, f64({10, 2, 30, -1, -1, -1}, {2, 3}));
  const Tensor i = zeros({3}, {DType::Int64});
  copy_(i, f64({1.9, -2.5, 3}, {3}));  // truncation, as static_cast
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, -2, 3});
  const uint64_t before = x.storage().version();
  copy_(transpose(x, 0, 1), f64({7, 8}, {2}));
  check_close(x, f64({7, 7, 7, 8, 8, 8}, {2, 3}));
  CHECK(x.storage().version() == before + 1);

  // A source that shares memory with the destination is read as it was before the write.
  const Tensor s = f64({1, 2, 3, 4}, {2, 2});
  add_(s, transpose(s, 0, 1));
  check_close(s, f64({2, 5, 5, 8}, {2, 2}));
  copy_(s, transpose(s, 0, 1));
  check_close(s, f64({2, 5, 5, 8}, {2, 2}));
  const Tensor r = f64({1, 2, 3, 4}, {2, 2});
  copy_(r, transpose(r, 0, 1));
  check_close(r, f64({1, 3, 2, 4}, {2, 2}));
  const Tensor run = f64({1, 2, 3}, {3});
  add_(slice(run, 0, 1, 3), slice(run, 0, 0, 2));  // run[1:] += run[:2]
  check_close(run, f64({1, 3, 5}, {3}));
  add_(run, run);
  check_close(run, f64({2, 6, 10}, {3}));

  check_error([&] { add_(expand(f64({1}, {1}), {3}), f64({1, 2, 3}, {3})); }, {"add_", "expanded"});
  check_error([&] { add_(x, f64({1, 2}, {2})); }, {"add_", "cannot be broadcast"});
  check_error([&] { add_(f64({1}, {1}), f64({1, 2}, {2})); }, {"add_", "(2,)", "cannot be broadcast to", "(1,)"});
  check_error([&] { add_(x, to(x, DType::Float32)); }, {"add_", "dtype mismatch"});
  check_error([&] { copy_(x, f64({1, 2, 3, 4}, {4})); }, {"copy_", "(4,)", "(2, 3)"});
  check_error([&] { fill_(Tensor(), 1); }, {"fill_", "undefined"});
}

// ---------------------------------------------------------------------------------------------
// Bad input

TEST_CASE("elementwise ops reject mismatched shapes and dtypes with the op's name") {
  const Tensor a = zeros({2, 3}, {DType::Float64});
  const Tensor b = zeros({4}, {DType::Float64});
  const std::vector<std::pair<const char*, BinaryOp>> ops = {
      {"add", [](const Tensor& x, const Tensor& y) { return add(x, y); }},
      {"sub", [](const Tensor& x, const Tensor& y) { return sub(x, y); }},
      {"mul", [](const Tensor& x, const Tensor& y) { return mul(x, y); }},
      {"div", [](const Tensor& x, const Tensor& y) { return div(x, y); }},
      {"pow", [](const Tensor& x, const Tensor& y) { return pow(x, y); }},
      {"eq", [](const Tensor& x, const Tensor& y) { return eq(x, y); }},
      {"ne", [](const Tensor& x, const Tensor& y) { return ne(x, y); }},
      {"lt", [](const Tensor& x, const Tensor& y) { return lt(x, y); }},
      {"le", [](const Tensor& x, const Tensor& y) { return le(x, y); }},
      {"gt", [](const Tensor& x, const Tensor& y) { return gt(x, y); }},
      {"ge", [](const Tensor& x, const Tensor& y) { return ge(x, y); }}};
  for (const auto& [name, op] : ops) {
    INFO("op: " << name);
    const std::string prefix = std::string(name) + ": ";
    check_error([&] { op(a, b); }, {prefix, "(2, 3)", "(4,)", "cannot be broadcast"});
    check_error([&] { op(a, zeros({2, 3}, {DType::Float32})); }, {prefix, "dtype mismatch", "float64", "float32"});
    check_error([&] { op(a, Tensor()); }, {prefix, "undefined"});
  }
  check_error([&] { a + zeros({3, 3}, {DType::Float64}); }, {"add: ", "(2, 3)", "(3, 3)"});
}

TEST_CASE("where, masked_fill and clamp reject bad arguments") {
  const Tensor x = zeros({2, 3}, {DType::Float64});
  const Tensor mask = from_vector<bool>({true, false, true}, {3});
  check_error([&] { where(x, x, x); }, {"where", "condition must be bool", "float64"});
  check_error([&] { where(mask, x, zeros({2, 3})); }, {"where", "dtype mismatch"});
  check_error([&] { where(mask, x, zeros({4}, {DType::Float64})); }, {"where", "cannot be broadcast"});
  check_error([&] { where(from_vector<bool>({true, false}, {2}), x, x); }, {"where", "cannot be broadcast"});
  check_error([&] { where(mask, Tensor(), x); }, {"where", "undefined"});
  check_error([&] { masked_fill(x, zeros({3}), 1); }, {"masked_fill", "bool", "float32"});
  check_error([&] { masked_fill(x, from_vector<bool>({true, false}, {2}), 1); }, {"masked_fill", "(2,)", "(2, 3)"});
  check_error([&] { masked_fill(x, from_vector<bool>({}, {2, 2, 0}), 1); }, {"masked_fill", "(2, 2, 0)", "(2, 3)"});
  check_error([&] { masked_fill(x, from_vector<bool>(std::vector<bool>(12, true), {2, 2, 3}), 1); },
              {"masked_fill", "(2, 2, 3)", "cannot be broadcast to", "(2, 3)"});
  check_error([&] { clamp(x, 1, -1); }, {"clamp", "lo <= hi"});
  check_error([&] { clamp(zeros({2}, {DType::Int64}), -1, 1); }, {"clamp", "floating", "int64"});
}

TEST_CASE("elementwise ops reject operands on different devices") {
  if (!cuda::is_available()) {
    MESSAGE("skipped: elementwise device-mismatch checks need a GPU (" << cuda::unavailable_reason() << ")");
    return;
  }
  const Tensor cpu = zeros({2, 3}, {DType::Float32});
  const Tensor gpu = zeros({2, 3}, {DType::Float32, Device::cuda()});
  const Tensor mask = from_vector<bool>({true, false, true}, {3});
  check_error([&] { add(cpu, gpu); }, {"add", "one device", "cpu", "cuda:0"});
  check_error([&] { mul(gpu, cpu); }, {"mul", "one device", "cpu", "cuda:0"});
  check_error([&] { pow(cpu, gpu); }, {"pow", "one device"});
  check_error([&] { lt(cpu, gpu); }, {"lt", "one device"});
  check_error([&] { where(mask, cpu, gpu); }, {"where", "one device"});
  check_error([&] { where(to(mask, Device::cuda()), cpu, cpu); }, {"where", "one device"});
  check_error([&] { add_(cpu, gpu); }, {"add_", "one device"});
}

TEST_CASE("unary ops save for the backward pass only what it reads: relu's input is not held, gelu's is") {
  constexpr int64_t n = 1 << 16, bytes = n * 4;  // one float32 tensor of n
  Generator gen(41);
  const Tensor w = randn({n}, gen).set_requires_grad(true);
  Allocator& alloc = context(Device::cpu()).allocator();
  auto held_after = [&](Tensor (*f)(const Tensor&)) {  // bytes held once f(x) is made and x dropped
    alloc.empty_cache();  // so that each block is exactly its size, not a cached one up to 1/8 larger
    const int64_t before = alloc.stats().in_use;
    Tensor y;
    {
      const Tensor x = w + 1.0;  // held by nothing but y's backward, if it reads x
      y = f(x);
    }
    const int64_t held = alloc.stats().in_use - before;
    sum(y).backward();
    return held;
  };
  CHECK(held_after(relu) == bytes);  // y alone
  CHECK(held_after(sigmoid) == bytes);
  CHECK(held_after(gelu) == 2 * bytes);  // y and x
  // relu's gradient from its output: dx = dy where y > 0, the same as where x > 0
  w.zero_grad();
  sum(relu(w + 1.0)).backward();
  const std::vector<float> grad = w.grad().to_vector<float>(), values = w.to_vector<float>();
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += grad[i] != (values[i] + 1.0f > 0 ? 1.0f : 0.0f);
  CHECK(wrong == 0);
}

TEST_CASE("binary ops hold their output for the backward pass only where a gradient reads it (pow)") {
  constexpr int64_t n = 1 << 16, bytes = n * 4;
  Generator gen(42);
  const Tensor a = rand({n}, gen).set_requires_grad(true), b = rand({n}, gen).set_requires_grad(true);
  Allocator& alloc = context(Device::cpu()).allocator();
  auto held_after = [&](Tensor (*f)(const Tensor&, const Tensor&)) {  // once sum(f(a, b)) is made
    alloc.empty_cache();  // so that each block is exactly its size, not a cached one up to 1/8 larger
    const int64_t before = alloc.stats().in_use;
    Tensor total;
    { total = sum(f(a, b)); }  // sum keeps no input: f's output is held only if f's backward reads it
    const int64_t held = alloc.stats().in_use - before;
    total.backward();
    return held;
  };
  const int64_t scalar = held_after(mul);  // the 0-d sum alone
  CHECK(scalar < bytes);
  CHECK(held_after(div) == scalar);
  CHECK(held_after(maximum) == scalar);
  CHECK(held_after(static_cast<Tensor (*)(const Tensor&, const Tensor&)>(pow)) == scalar + bytes);
}

TEST_CASE("binary ops hold an input only where a wanted gradient reads it: x · c keeps c, not x") {
  constexpr int64_t n = 1 << 16, bytes = n * 4;
  Generator gen(43);
  const Tensor w = rand({n}, gen).set_requires_grad(true), c = rand({n}, gen) + 1.0;
  const Tensor c_grad = (rand({n}, gen) + 1.0).set_requires_grad(true);
  Allocator& alloc = context(Device::cpu()).allocator();
  // bytes held beyond the output once f(x, c) is made and x dropped
  auto held_after = [&](const std::function<Tensor(const Tensor&)>& f) {
    alloc.empty_cache();  // so that each block is exactly its size, not a cached one up to 1/8 larger
    const int64_t before = alloc.stats().in_use;
    Tensor y;
    {
      const Tensor x = w + 1.0;  // held by nothing but y's backward, if it keeps x
      y = f(x);
    }
    const int64_t held = alloc.stats().in_use - before - bytes;
    sum(y).backward();
    return held;
  };
  CHECK(held_after([&](const Tensor& x) { return x * c; }) == 0);       // da = dy ⊙ c
  CHECK(held_after([&](const Tensor& x) { return x / c; }) == 0);       // da = dy / c
  CHECK(held_after([&](const Tensor& x) { return x * c_grad; }) == bytes);  // dc = dy ⊙ x
  CHECK(held_after([&](const Tensor& x) { return c / x; }) == bytes);       // dx = −dy ⊙ c / x²
  CHECK(held_after([&](const Tensor& x) { return maximum(x, c); }) == bytes);
}

TEST_CASE("for_each_run visits every element once at its offsets, merging dims where every operand allows") {
  // Two operands: each element's offsets from its index, against the offsets the runs visit.
  struct Case {
    Shape shape;
    std::array<Strides, 2> strides;
    Shape merged;  // the shape coalesce_dims makes
  };
  const std::vector<Case> cases{
      {{30, 65, 64}, {Strides{4160, 64, 1}, Strides{4160, 64, 1}}, {124800}},  // contiguous: one dim
      {{3, 1, 5, 1}, {Strides{5, 5, 1, 1}, Strides{5, 7, 1, 9}}, {15}},         // size-1 dims dropped
      {{4, 6, 8}, {Strides{48, 8, 1}, Strides{6, 1, 0}}, {24, 8}},            // a mask along the last dim
      {{2, 3, 4, 5}, {Strides{60, 20, 5, 1}, Strides{60, 5, 15, 1}}, {2, 3, 4, 5}},  // heads split by a permute
      {{2, 3, 4, 5}, {Strides{60, 5, 15, 1}, Strides{60, 5, 15, 1}}, {120}},  // both so: in their layout's order
      {{5, 7}, {Strides{7, 1}, Strides{1, 5}}, {5, 7}},                        // a transposed operand
      {{6, 10}, {Strides{10, 1}, Strides{20, 2}}, {60}},                       // every second element
      {{6, 10}, {Strides{10, 1}, Strides{12, 1}}, {6, 10}},                    // rows of a wider matrix
      {{2, 3, 4}, {Strides{12, 4, 1}, Strides{0, 0, 0}}, {24}},                // a broadcast scalar
      {{70000}, {Strides{1}, Strides{1}}, {70000}},                            // chunks across threads
  };
  for (const Case& c : cases) {
    INFO(to_string(c.shape));
    Shape shape = c.shape;
    std::array<Strides, 2> strides = c.strides;
    coalesce_dims(shape, strides);
    CHECK(shape == c.merged);
    std::map<int64_t, std::pair<int64_t, int>> seen;  // operand 0's offset → operand 1's, times visited
    std::mutex lock;
    for_each_run(c.shape, c.strides, [&](const auto& base, int64_t count, const auto& step) {
      const std::lock_guard<std::mutex> guard(lock);
      for (int64_t j = 0; j < count; ++j) {
        auto& entry = seen[base[0] + j * step[0]];
        entry.first = base[1] + j * step[1];
        ++entry.second;
      }
    });
    int64_t wrong = 0, n = numel(c.shape);
    for (int64_t i = 0; i < n; ++i) {
      int64_t rest = i, o0 = 0, o1 = 0;
      for (int64_t d = static_cast<int64_t>(c.shape.size()) - 1; d >= 0; --d) {
        const int64_t index = rest % c.shape[d];
        rest /= c.shape[d];
        o0 += index * c.strides[0][d];
        o1 += index * c.strides[1][d];
      }
      const auto it = seen.find(o0);
      wrong += it == seen.end() || it->second.first != o1 || it->second.second != 1;
    }
    CHECK(wrong == 0);
    CHECK(static_cast<int64_t>(seen.size()) == n);
  }
}

