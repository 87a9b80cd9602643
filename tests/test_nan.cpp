// NaN propagates through every op, wherever it sits (docs/PORTING.md, "NaN"): reductions of a group
// holding a NaN are NaN, argmax / argmin point at its first NaN, elementwise ops give NaN for a NaN
// input, comparisons with NaN are false (ne: true), and an attention whose query is NaN does not
// hand that query a finite output.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// Rows of 5 finite values, the row `r` with a NaN at column `at` (and the other rows finite).
Tensor rows_with_nan(int64_t at, DType dtype, int64_t r = 1) {
  std::vector<double> v = {0.5, -2, 3, 1, -1, 4, 2, -3, 0.25, 1.5, -0.5, 7, 2, 2, -6};
  v[size_t(r * 5 + at)] = kNaN;
  return to(from_vector(v, {3, 5}), dtype);
}

}  // namespace

TEST_CASE("NaN: max, min, sum, mean, var, logsumexp of a row holding a NaN are NaN; argmax, argmin point at it") {
  for (const DType dtype : {DType::Float32, DType::Float64})
    for (const int64_t at : {0, 2, 4}) {  // first, middle, last
      CAPTURE(dtype);
      CAPTURE(at);
      const Tensor x = rows_with_nan(at, dtype);
      const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> reductions = {
          {"max", [](const Tensor& t) { return max(t, {1}); }},
          {"min", [](const Tensor& t) { return min(t, {1}); }},
          {"sum", [](const Tensor& t) { return sum(t, {1}); }},
          {"mean", [](const Tensor& t) { return mean(t, {1}); }},
          {"var", [](const Tensor& t) { return var(t, {1}); }},
          {"logsumexp", [](const Tensor& t) { return logsumexp(t, {1}); }},
          {"stddev", [](const Tensor& t) { return stddev(t, {1}); }},
          {"norm 1", [](const Tensor& t) { return norm(t, 1, {1}); }},
          {"norm 2", [](const Tensor& t) { return norm(t, 2, {1}); }},
          {"norm inf", [](const Tensor& t) { return norm(t, INFINITY, {1}); }},
      };
      for (const auto& [name, reduce] : reductions) {
        CAPTURE(name);
        const std::vector<double> y = reduce(x).to_vector<double>();
        CHECK(std::isfinite(y[0]));
        CHECK(std::isnan(y[1]));
        CHECK(std::isfinite(y[2]));
      }
      CHECK(argmax(x, 1).to_vector<int64_t>() == std::vector<int64_t>{2, at, 1});
      CHECK(argmin(x, 1).to_vector<int64_t>() == std::vector<int64_t>{1, at, 4});
      // Over every element, too.
      CHECK(std::isnan(max(x).item<double>()));
      CHECK(std::isnan(min(x).item<double>()));
    }
  // Two NaNs: the first.
  const Tensor two = from_vector(std::vector<double>{1, kNaN, 5, kNaN}, {1, 4});
  CHECK(argmax(two, 1).item<int64_t>() == 1);
  CHECK(argmin(two, 1).item<int64_t>() == 1);
}

TEST_CASE("NaN: every elementwise op gives NaN for a NaN input; comparisons with NaN are false") {
  const Tensor x = from_vector(std::vector<double>{kNaN, 1.5, -0.5}, {3});
  const Tensor y = from_vector(std::vector<double>{2.0, kNaN, 2.0}, {3});
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> unary = {
      {"neg", [](const Tensor& t) { return neg(t); }},
      {"abs", [](const Tensor& t) { return abs(t); }},
      {"exp", [](const Tensor& t) { return exp(t); }},
      {"log", [](const Tensor& t) { return log(t); }},
      {"sqrt", [](const Tensor& t) { return sqrt(t); }},
      {"rsqrt", [](const Tensor& t) { return rsqrt(t); }},
      {"tanh", [](const Tensor& t) { return tanh(t); }},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); }},
      {"relu", [](const Tensor& t) { return relu(t); }},
      {"gelu", [](const Tensor& t) { return gelu(t); }},
      {"clamp", [](const Tensor& t) { return clamp(t, -1, 1); }},
      {"pow", [](const Tensor& t) { return pow(t, 2.0); }},
      {"log1p", [](const Tensor& t) { return log1p(t); }},
      {"expm1", [](const Tensor& t) { return expm1(t); }},
      {"sin", [](const Tensor& t) { return sin(t); }},
      {"cos", [](const Tensor& t) { return cos(t); }},
      {"silu", [](const Tensor& t) { return silu(t); }},
      {"leaky_relu", [](const Tensor& t) { return leaky_relu(t); }},
      {"softplus", [](const Tensor& t) { return softplus(t); }},
      {"softmax", [](const Tensor& t) { return softmax(reshape(t, {1, 3})); }},
  };
  for (const DType dtype : {DType::Float32, DType::Float64})
    for (const auto& [name, f] : unary) {
      CAPTURE(dtype);
      CAPTURE(name);
      CHECK(std::isnan(f(to(x, dtype)).to_vector<double>()[0]));
    }
  // relu of a NaN is NaN, of a negative 0; its gradient at NaN is 0 ([x > 0]).
  CHECK(relu(x).to_vector<double>()[2] == 0.0);
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&, const Tensor&)>>> binary = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }},
      // x and a bound, each side NaN in turn.
      {"clamp lo", [](const Tensor& a, const Tensor& b) { return clamp(a, b, full({}, 10.0, a.options())); }},
      {"clamp hi", [](const Tensor& a, const Tensor& b) { return clamp(a, full({}, -10.0, a.options()), b); }},
  };
  for (const auto& [name, f] : binary) {
    CAPTURE(name);
    const std::vector<double> z = f(x, y).to_vector<double>();
    CHECK(std::isnan(z[0]));  // NaN on the left
    CHECK(std::isnan(z[1]));  // NaN on the right
    CHECK(std::isfinite(z[2]));
  }
  CHECK(eq(x, x).to_vector<bool>() == std::vector<bool>{false, true, true});
  CHECK(ne(x, x).to_vector<bool>() == std::vector<bool>{true, false, false});
  CHECK(lt(x, y).to_vector<bool>()[0] == false);
  CHECK(gt(x, y).to_vector<bool>()[0] == false);
  CHECK(le(x, y).to_vector<bool>()[0] == false);
  CHECK(ge(x, y).to_vector<bool>()[0] == false);
}

TEST_CASE("NaN: an attention whose query is NaN gives that query no finite output") {
  Generator gen(0);
  const Tensor q = randn({1, 2, 12, 4}, gen, {DType::Float64}), k = randn({1, 2, 12, 4}, gen, {DType::Float64}),
               v = randn({1, 2, 12, 4}, gen, {DType::Float64});
  std::vector<double> qv = q.to_vector<double>();
  qv[5 * 4 + 1] = kNaN;  // head 0, query 5
  const Tensor q_nan = from_vector(qv, q.shape());
  for (const char* config : {"full", "clustered:clusters=3", "improved-clustered:clusters=3,topk=4"}) {
    CAPTURE(config);
    Generator g(1);
    const Tensor out = attention::attend(attention::AttentionConfig::parse(config), q_nan, k, v, {},
                                         attention::Causal::No, g);
    CHECK(std::isnan(select(select(select(out, 0, 0), 0, 0), 0, 5).to_vector<double>()[0]));
    // The other head never sees it.
    for (const double value : select(select(out, 0, 0), 0, 1).to_vector<double>()) CHECK(std::isfinite(value));
  }
}

TEST_CASE("NaN: cumsum is NaN from the NaN on; maximum / minimum / clamp propagate it from any position") {
  for (const DType dtype : {DType::Float32, DType::Float64})
    for (const int64_t at : {0, 2, 4}) {  // first, middle, last
      CAPTURE(dtype);
      CAPTURE(at);
      const Tensor x = rows_with_nan(at, dtype);
      const std::vector<double> c = cumsum(x, 1).to_vector<double>();
      for (int64_t j = 0; j < 5; ++j) {
        CHECK(std::isfinite(c[size_t(j)]));              // row 0
        CHECK(std::isnan(c[size_t(5 + j)]) == (j >= at));  // row 1, NaN from `at` on
        CHECK(std::isfinite(c[size_t(10 + j)]));         // row 2
      }
      const Tensor finite = full({3, 5}, 1.0, {dtype});
      for (const Tensor& y : {maximum(x, finite), maximum(finite, x), minimum(x, finite), minimum(finite, x),
                              clamp(x, full({}, -1.0, {dtype}), full({}, 1.0, {dtype})),
                              clamp(finite, x, full({}, 5.0, {dtype})), clamp(finite, full({}, -5.0, {dtype}), x)}) {
        const std::vector<double> v = y.to_vector<double>();
        for (size_t i = 0; i < v.size(); ++i) CHECK(std::isnan(v[i]) == (i == size_t(5 + at)));
      }
    }
}

TEST_CASE("NaN: the losses of an input holding a NaN are NaN") {
  const Tensor x = rows_with_nan(2, DType::Float64);  // (3, 5)
  const Tensor targets = from_vector<int64_t>({0, 1, 2}, {3});
  CHECK(std::isnan(nll_loss(log_softmax(x), targets).item<double>()));
  CHECK(std::isnan(mse_loss(x, zeros({3, 5}, {DType::Float64})).item<double>()));
  CHECK(std::isnan(kl_div(log_softmax(x), softmax(zeros({3, 5}, {DType::Float64}))).item<double>()));
  CHECK(std::isnan(kl_div(log_softmax(zeros({3, 5}, {DType::Float64})), softmax(x)).item<double>()));
}
