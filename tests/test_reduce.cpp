// Reductions (ops/reduce.h) against naive loops written here, gradients by gradcheck, ties,
// logsumexp at extreme values, variance corrections, argmax / argmin and bad input.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

using Inputs = std::vector<Tensor>;
using Fold = std::function<double(const std::vector<double>&)>;
using Reduction = std::function<Tensor(const Tensor&, const std::vector<int64_t>&, KeepDim)>;

constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor f64(const std::vector<double>& values, const Shape& shape) { return from_vector<double>(values, shape); }

// For each element of `shape` (row-major), its group under a reduction over `dims`: the row-major
// position of its index among the kept dims, which is where its result lands in the output.
std::vector<int64_t> group_of(const Shape& shape, const std::vector<int64_t>& dims) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  std::vector<bool> reduced(shape.size(), false);
  for (int64_t d : dims) reduced[d < 0 ? d + ndim : d] = true;
  std::vector<int64_t> groups(numel(shape));
  for (int64_t i = 0; i < numel(shape); ++i) {
    int64_t rest = i, group = 0, scale = 1;
    for (int64_t d = ndim - 1; d >= 0; --d) {
      const int64_t index = rest % shape[d];
      rest /= shape[d];
      if (!reduced[d]) group += index * scale, scale *= shape[d];
    }
    groups[i] = group;
  }
  return groups;
}

int64_t group_count(const Shape& shape, const std::vector<int64_t>& dims) {
  const std::vector<int64_t> groups = group_of(shape, dims);
  return groups.empty() ? 0 : *std::max_element(groups.begin(), groups.end()) + 1;
}

// The reference: the elements of `values` (row-major, of `shape`) grouped as above, each group in
// row-major order (so along a single reduced dim, in index order), folded by `fold`.
std::vector<double> naive_reduce(const std::vector<double>& values, const Shape& shape,
                                 const std::vector<int64_t>& dims, const Fold& fold) {
  const std::vector<int64_t> groups = group_of(shape, dims);
  std::vector<std::vector<double>> members(group_count(shape, dims));
  for (size_t i = 0; i < values.size(); ++i) members[groups[i]].push_back(values[i]);
  std::vector<double> out;
  for (const auto& m : members) out.push_back(fold(m));
  return out;
}

Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, KeepDim keepdim) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  Shape out;
  for (int64_t d = 0; d < ndim; ++d) {
    bool r = false;
    for (int64_t e : dims) r = r || (e < 0 ? e + ndim : e) == d;
    if (!r) out.push_back(shape[d]);
    else if (keepdim == KeepDim::Yes) out.push_back(1);
  }
  return out;
}

double fold_sum(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += e;
  return s;
}
double fold_mean(const std::vector<double>& v) { return fold_sum(v) / static_cast<double>(v.size()); }
double fold_max(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }
double fold_min(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double fold_logsumexp(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += std::exp(e);
  return std::log(s);
}
Fold fold_var(int64_t correction) {
  return [correction](const std::vector<double>& v) {
    const double mu = fold_mean(v);
    double s = 0;
    for (double e : v) s += (e - mu) * (e - mu);
    return s / static_cast<double>(static_cast<int64_t>(v.size()) - correction);
  };
}
Fold fold_std(int64_t correction) {
  return [correction](const std::vector<double>& v) { return std::sqrt(fold_var(correction)(v)); };
}
double fold_norm1(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += std::abs(e);
  return s;
}
double fold_norm2(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += e * e;
  return std::sqrt(s);
}
double fold_norm_inf(const std::vector<double>& v) {
  double m = 0;
  for (double e : v) m = std::max(m, std::abs(e));
  return m;
}
// Index of the first maximum (minimum) of a group.
double fold_argmax(const std::vector<double>& v) {
  return static_cast<double>(std::max_element(v.begin(), v.end()) - v.begin());
}
double fold_argmin(const std::vector<double>& v) {
  return static_cast<double>(std::min_element(v.begin(), v.end()) - v.begin());
}

struct ReductionCase {
  const char* name;
  Reduction op;
  Fold fold;
};

std::vector<ReductionCase> reduction_cases() {
  return {
      {"sum", [](const Tensor& x, const std::vector<int64_t>& d, KeepDim k) { return sum(x, d, k); }, fold_sum},
      {"mean", [](const Tensor& x, const std::vector<int64_t>& d, KeepDim k) { return mean(x, d, k); }, fold_mean},
      {"max", [](const Tensor& x, const std::vector<int64_t>& d, KeepDim k) { return max(x, d, k); }, fold_max},
      {"min", [](const Tensor& x, const std::vector<int64_t>& d, KeepDim k) { return min(x, d, k); }, fold_min},
      {"logsumexp", [](const Tensor& x, const std::vector<int64_t>& d, KeepDim k) { return logsumexp(x, d, k); },
       fold_logsumexp},
      {"var (correction 1)", [](const Tensor& x, const std::vector<int64_t>& d, KeepDim k) { return var(x, d, k); },
       fold_var(1)},
      {"var (correction 0)", [](const Tensor& x, const std::vector<int64_t>& d, KeepDim k) { return var(x, d, k, 0); },
       fold_var(0)},
      {"stddev (correction 1)", [](const Tensor& x, const std::vector<int64_t>& d, KeepDim k) { return stddev(x, d, k); },
       fold_std(1)},
      {"stddev (correction 0)",
       [](const Tensor& x, const std::vector<int64_t>& d, KeepDim k) { return stddev(x, d, k, 0); }, fold_std(0)},
      {"norm 1", [](const Tensor& x, const std::vector<int64_t>& d, KeepDim k) { return norm(x, 1, d, k); }, fold_norm1},
      {"norm 2", [](const Tensor& x, const std::vector<int64_t>& d, KeepDim k) { return norm(x, 2, d, k); }, fold_norm2},
      {"norm inf", [](const Tensor& x, const std::vector<int64_t>& d, KeepDim k) { return norm(x, kInf, d, k); },
       fold_norm_inf},
  };
}

// Dims lists: single, several (in any order), negative, all, none.
const std::vector<std::vector<int64_t>> kDimsLists = {{0},     {1},      {2},       {-1},      {0, 2},
                                                      {2, 0},  {-1, -3}, {0, 1, 2}, {1, -1},   {}};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Values against naive loops

TEST_CASE("reductions match naive loops over dims lists, negative dims and both keepdims") {
  const Shape shape = {3, 4, 5};
  for (DType dtype : {DType::Float64, DType::Float32}) {
    const Tensor x = to(uniform(shape, 1, -3, 3), dtype);
    const std::vector<double> values = x.to_vector<double>();
    const double tol = dtype == DType::Float64 ? 1e-12 : 2e-6;
    for (const ReductionCase& c : reduction_cases()) {
      for (const auto& dims : kDimsLists) {
        if (dims.empty() && std::isnan(c.fold({1.0}))) continue;  // var, correction 1, of one element: 0 / 0
        for (KeepDim keepdim : {KeepDim::No, KeepDim::Yes}) {
          INFO(c.name << " over " << to_string(dims) << (keepdim == KeepDim::Yes ? " keepdim" : "") << " in "
                      << dtype);
          const Tensor y = c.op(x, dims, keepdim);
          CHECK(y.dtype() == dtype);
          REQUIRE(y.shape() == reduced_shape(shape, dims, keepdim));
          check_close(y, f64(naive_reduce(values, shape, dims, c.fold), y.shape()), tol, tol);
        }
      }
    }
  }
}

TEST_CASE("reductions of tensors large enough to run in parallel match naive loops") {
  const Shape shape = {150, 301};
  const Tensor x = uniform(shape, 4, -3, 3);
  const std::vector<double> values = x.to_vector<double>();
  for (const ReductionCase& c : reduction_cases()) {
    for (const auto& dims : std::vector<std::vector<int64_t>>{{0}, {1}, {0, 1}}) {
      INFO(c.name << " over " << to_string(dims));
      const Tensor y = c.op(x, dims, KeepDim::No);
      check_close(y, f64(naive_reduce(values, shape, dims, c.fold), y.shape()), 1e-11, 1e-11);
    }
  }
  check_close(argmax(x, 0), f64(naive_reduce(values, shape, {0}, fold_argmax), {301}), 0, 0);
  check_close(argmin(x, 1), f64(naive_reduce(values, shape, {1}, fold_argmin), {150}), 0, 0);
}

TEST_CASE("sums over leading dims (column sums) equal the row-wise sums bit for bit") {
  // Few columns, as a bias gradient has: one block of them per thread (100: not a multiple of 16)
  for (DType dtype : {DType::Float32, DType::Float64})
    for (const Shape& shape : std::vector<Shape>{{2000, 64}, {300, 100}, {50, 3}}) {
      INFO(dtype << " " << to_string(shape));
      const Tensor x = to(uniform(shape, 7, -3, 3), dtype);
      CHECK(sum(x, {0}).to_vector<double>() == sum(contiguous(transpose(x, 0, 1)), {1}).to_vector<double>());
    }
  // 1300 columns: several column blocks of the in-place path, split across threads
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const Tensor x = to(uniform({7, 10, 1300}, 6, -3, 3), dtype);
    const std::vector<double> values = x.to_vector<double>();
    const Tensor by_columns = sum(x, {0, 1});
    const Tensor by_rows = sum(contiguous(permute(x, {2, 0, 1})), {1, 2});  // the same sums, as rows
    CHECK(by_columns.to_vector<double>() == by_rows.to_vector<double>());
    check_close(by_columns, f64(naive_reduce(values, {7, 10, 1300}, {0, 1}, fold_sum), {1300}),
                1e-5, 1e-5);
    check_close(sum(x, {0}, KeepDim::Yes), f64(naive_reduce(values, {7, 10, 1300}, {0}, fold_sum), {1, 10, 1300}),
                1e-5, 1e-5);
  }
}

TEST_CASE("reductions without dims reduce everything to a 0-d tensor") {
  const Tensor x = uniform({2, 3, 2}, 2);
  const std::vector<double> v = x.to_vector<double>();
  const std::vector<std::pair<Tensor, double>> cases = {
      {sum(x), fold_sum(v)}, {mean(x), fold_mean(v)}, {max(x), fold_max(v)}, {min(x), fold_min(v)}};
  for (const auto& [y, want] : cases) {
    CHECK(y.shape() == Shape{});
    CHECK(y.item<double>() == doctest::Approx(want).epsilon(1e-14));
  }
  // A 0-d input reduces to itself.
  CHECK(sum(scalar(2.5, {DType::Float64})).item<double>() == 2.5);
  CHECK(max(scalar(-1.5, {DType::Float64})).item<double>() == -1.5);
}

TEST_CASE("reductions read non-contiguous inputs") {
  const Tensor base = uniform({4, 6, 3}, 3);
  const Tensor x = slice(permute(base, {2, 0, 1}), 2, 1, 6, 2);  // (3, 4, 3), no unit stride
  const Tensor packed = clone(x);
  REQUIRE_FALSE(x.is_contiguous());
  for (const ReductionCase& c : reduction_cases()) {
    for (const auto& dims : std::vector<std::vector<int64_t>>{{0}, {1, 2}, {-1}}) {
      INFO(c.name << " over " << to_string(dims));
      check_close(c.op(x, dims, KeepDim::No), c.op(packed, dims, KeepDim::No), 1e-14, 1e-14);
    }
  }
  // An expanded input: every element of the broadcast dim counts.
  const Tensor row = f64({1, 2, 3}, {1, 3});
  check_close(sum(expand(row, {4, 3}), {0}), f64({4, 8, 12}, {3}));
}

TEST_CASE("sum and max work on integers; float32 sums stay accurate over many elements") {
  const Tensor i = from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(sum(i, {1}).dtype() == DType::Int64);
  CHECK(sum(i, {1}).to_vector<int64_t>() == std::vector<int64_t>{6, 15});
  CHECK(sum(i).item<int64_t>() == 21);
  CHECK(max(i, {0}).to_vector<int64_t>() == std::vector<int64_t>{4, 5, 6});
  CHECK(min(from_vector<int32_t>({3, -7, 2}, {3})).item<int32_t>() == -7);
  // 2^20 times 0.1f: a running float32 sum drifts by several percent.
  const Tensor tenths = full({1 << 20}, 0.1);
  const double want = (1 << 20) * static_cast<double>(0.1f);
  CHECK(sum(tenths).item<double>() == doctest::Approx(want).epsilon(1e-6));
  CHECK(mean(tenths, {0}).item<double>() == doctest::Approx(0.1f).epsilon(1e-6));
}

// ---------------------------------------------------------------------------------------------
// Gradients

TEST_CASE("reductions: gradients over dims lists, keepdim, non-contiguous, size-1 and empty inputs") {
  for (const ReductionCase& c : reduction_cases()) {
    const Reduction op = c.op;
    for (const auto& dims : std::vector<std::vector<int64_t>>{{0}, {-1}, {0, 2}, {2, 1, 0}}) {
      for (KeepDim keepdim : {KeepDim::No, KeepDim::Yes}) {
        INFO(c.name << " over " << to_string(dims) << (keepdim == KeepDim::Yes ? " keepdim" : ""));
        check_gradients([op, dims, keepdim](const Inputs& in) { return op(in[0], dims, keepdim); },
                        {uniform({2, 3, 4}, 10, -2, 2)});
      }
    }
    INFO(c.name);
    // A transposed view of a (3, 4), reduced along each dim; a slice with step.
    check_gradients([op](const Inputs& in) { return op(transpose(in[0], 0, 1), {0}, KeepDim::No); },
                    {uniform({3, 4}, 11)});
    check_gradients([op](const Inputs& in) { return op(transpose(in[0], 0, 1), {1}, KeepDim::Yes); },
                    {uniform({3, 4}, 12)});
    check_gradients([op](const Inputs& in) { return op(slice(in[0], 1, 0, 7, 3), {-1}, KeepDim::No); },
                    {uniform({3, 7}, 13)});
    // Size-1 dims among the reduced ones.
    check_gradients([op](const Inputs& in) { return op(in[0], {0, 2}, KeepDim::No); }, {uniform({1, 3, 2}, 14)});
    // Reducing a non-empty dim of a tensor with an empty dim.
    const Tensor empty = uniform({2, 0, 3}, 15);
    CHECK(op(empty, {2}, KeepDim::No).shape() == Shape{2, 0});
    CHECK(op(empty, {0, 2}, KeepDim::Yes).shape() == Shape{1, 0, 1});
    check_gradients([op](const Inputs& in) { return op(in[0], {2}, KeepDim::No); }, {empty});
    check_gradients([op](const Inputs& in) { return op(in[0], {0}, KeepDim::Yes); }, {empty});
  }
}

TEST_CASE("reducing over an empty dim: sum 0, mean NaN, logsumexp −inf; max, min refuse") {
  const Tensor x = uniform({2, 0, 3}, 20);
  check_close(sum(x, {1}), zeros({2, 3}, {DType::Float64}));
  check_close(sum(x), scalar(0.0, {DType::Float64}));
  CHECK(sum(zeros({0}, {DType::Int64})).item<int64_t>() == 0);
  for (double v : mean(x, {1}).to_vector<double>()) CHECK(std::isnan(v));
  const Tensor lse = logsumexp(x, {1}, KeepDim::Yes);
  CHECK(lse.shape() == Shape{2, 1, 3});
  for (double v : lse.to_vector<double>()) CHECK(v == -kInf);
  CHECK(var(x, {1}).shape() == Shape{2, 3});
  // Backward through the reductions that accept an empty dim runs and yields an empty gradient.
  for (const ReductionCase& c : reduction_cases()) {
    if (std::string(c.name) == "max" || std::string(c.name) == "min" || std::string(c.name) == "norm inf") continue;
    INFO(c.name);
    Tensor leaf = clone(x);
    leaf.set_requires_grad(true);
    const Tensor y = c.op(leaf, {1}, KeepDim::No);
    CHECK(y.shape() == Shape{2, 3});
    y.backward(ones({2, 3}, {DType::Float64}));
    CHECK(leaf.grad().shape() == Shape{2, 0, 3});
  }
  check_error([&] { max(x, {1}); }, {"max", "empty dim", "(2, 0, 3)"});
  check_error([&] { norm(x, kInf, {1}); }, {"norm", "empty dim", "(2, 0, 3)"});
  check_error([&] { min(x); }, {"min", "empty dim", "(2, 0, 3)"});
  check_error([&] { argmax(x, 1); }, {"argmax", "empty dim", "(2, 0, 3)"});
  check_error([&] { argmin(x, -2); }, {"argmin", "empty dim", "(2, 0, 3)"});
  CHECK(argmax(x, 2).shape() == Shape{2, 0});
  CHECK(max(x, {0}).shape() == Shape{0, 3});
}

// ---------------------------------------------------------------------------------------------
// max / min ties

TEST_CASE("max and min share the gradient equally among ties") {
  Tensor x = f64({1, 3, 3, 2, 2, 2}, {2, 3});
  x.set_requires_grad(true);
  sum(max(x, {1}) * f64({1, 6}, {2})).backward();
  check_close(x.grad(), f64({0, 0.5, 0.5, 2, 2, 2}, {2, 3}), 1e-15, 0);
  x.zero_grad();
  max(x).backward();  // two tied maxima in the whole tensor
  check_close(x.grad(), f64({0, 0.5, 0.5, 0, 0, 0}, {2, 3}), 1e-15, 0);
  x.zero_grad();
  sum(min(x, {0}, KeepDim::Yes)).backward();  // column 1 and 2: min is 2, unique; column 0: 1
  check_close(x.grad(), f64({1, 0, 0, 0, 1, 1}, {2, 3}), 1e-15, 0);
  x.zero_grad();
  min(x).backward();
  check_close(x.grad(), f64({1, 0, 0, 0, 0, 0}, {2, 3}), 1e-15, 0);
}

TEST_CASE("max / min gradients with many ties match a naive count, over several dims") {
  Generator gen(30);
  const Tensor values = to(randint(0, 3, {3, 4, 5}, gen), DType::Float64);  // many ties
  const std::vector<double> v = values.to_vector<double>();
  const Shape shape = values.shape();
  for (bool is_max : {true, false}) {
    for (const auto& dims : std::vector<std::vector<int64_t>>{{1}, {0, 2}, {-1}, {0, 1, 2}}) {
      INFO((is_max ? "max" : "min") << " over " << to_string(dims));
      Tensor x = clone(values);
      x.set_requires_grad(true);
      const Tensor y = is_max ? max(x, dims) : min(x, dims);
      const Tensor w = uniform(y.shape(), 31);  // the seed gradient
      y.backward(w);
      // Expected: w of the element's group / (number of ties in the group), 0 off the extreme.
      const std::vector<double> extreme = naive_reduce(v, shape, dims, is_max ? fold_max : fold_min);
      const std::vector<double> ties = naive_reduce(v, shape, dims, [&](const std::vector<double>& g) {
        const double e = is_max ? fold_max(g) : fold_min(g);
        return static_cast<double>(std::count(g.begin(), g.end(), e));
      });
      const std::vector<int64_t> group = group_of(shape, dims);
      const std::vector<double> wv = w.to_vector<double>();
      std::vector<double> want(v.size());
      for (size_t i = 0; i < v.size(); ++i) {
        const int64_t g = group[i];
        want[i] = v[i] == extreme[g] ? wv[g] / ties[g] : 0.0;
      }
      check_close(x.grad(), f64(want, shape), 1e-15, 1e-15);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// logsumexp

TEST_CASE("logsumexp does not overflow at ±1e4 and keeps its gradient finite") {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    INFO(dtype);
    Tensor x = to(f64({1e4, 1e4 - 1, -1e4, -1e4, -1e4, -1e4}, {2, 3}), dtype);
    x.set_requires_grad(true);
    const Tensor y = logsumexp(x, {1});
    const double tol = dtype == DType::Float64 ? 1e-12 : 1e-3;  // float32's spacing at 1e4 is ~1e-3
    check_close(y, f64({1e4 + std::log1p(std::exp(-1.0)), -1e4 + std::log(3.0)}, {2}), tol, 0);
    y.backward(ones({2}, {dtype}));
    // dx = exp(x − y): y ≈ ±1e4 carries a rounding error of about 1e4·ε, which x − y keeps, so the
    // gradient is good to a relative 1e4·ε (1e-12 in float64, 1e-3 in float32), not to ε.
    const double p = 1 / (1 + std::exp(-1.0));  // softmax of (0, −1, −2e4)
    const double rel = dtype == DType::Float64 ? 1e-11 : 2e-3;
    check_close(x.grad(), f64({p, 1 - p, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3}, {2, 3}), 1e-300, rel);
    for (double v : x.grad().to_vector<double>()) CHECK(std::isfinite(v));
  }
}

TEST_CASE("logsumexp of a row of −inf is −inf, with a zero (not NaN) gradient") {
  Tensor x = f64({-kInf, -kInf, -kInf, 0, -kInf, 1}, {2, 3});
  x.set_requires_grad(true);
  const Tensor y = logsumexp(x, {-1}, KeepDim::Yes);
  CHECK(y.shape() == Shape{2, 1});
  const std::vector<double> got = y.to_vector<double>();
  CHECK(got[0] == -kInf);
  CHECK(got[1] == doctest::Approx(std::log(1 + std::exp(1.0))).epsilon(1e-14));
  y.backward(ones({2, 1}, {DType::Float64}));
  const double e = std::exp(1.0);
  check_close(x.grad(), f64({0, 0, 0, 1 / (1 + e), 0, e / (1 + e)}, {2, 3}), 1e-15, 1e-15);
  // The same over all dims and in float32.
  const Tensor all = logsumexp(full({2, 2}, -kInf), {0, 1});
  CHECK(all.to_vector<float>()[0] == -std::numeric_limits<float>::infinity());
}

// ---------------------------------------------------------------------------------------------
// var

TEST_CASE("var: corrections 0 and 1 on known values") {
  const Tensor x = f64({1, 2, 3, 4, 10, 20, 30, 40}, {2, 4});
  check_close(var(x, {1}, KeepDim::No, 0), f64({1.25, 125}, {2}));
  check_close(var(x, {1}), f64({5.0 / 3, 500.0 / 3}, {2}), 1e-14, 1e-14);
  check_close(var(x, {0, 1}, KeepDim::Yes, 0), f64({fold_var(0)({1, 2, 3, 4, 10, 20, 30, 40})}, {1, 1}), 1e-12, 1e-14);
  check_close(var(x, {0}, KeepDim::No, 1), f64({40.5, 162, 364.5, 648}, {4}), 1e-12, 1e-14);
  check_close(var(x, {1}, KeepDim::No, 2), f64({2.5, 250}, {2}), 1e-12, 1e-14);
}

// ---------------------------------------------------------------------------------------------
// argmax / argmin

TEST_CASE("argmax and argmin match naive loops, taking the first index on ties") {
  Generator gen(40);
  const Tensor ints = randint(0, 3, {3, 4, 5}, gen);  // many ties
  for (const Tensor& x : {ints, to(ints, DType::Float32), uniform({3, 4, 5}, 41)}) {
    const std::vector<double> v = x.to_vector<double>();
    for (int64_t dim : {0, 1, 2, -1, -3}) {
      for (KeepDim keepdim : {KeepDim::No, KeepDim::Yes}) {
        INFO(x.dtype() << " dim " << dim << (keepdim == KeepDim::Yes ? " keepdim" : ""));
        const Tensor amax = argmax(x, dim, keepdim), amin = argmin(x, dim, keepdim);
        CHECK(amax.dtype() == DType::Int64);
        REQUIRE(amax.shape() == reduced_shape(x.shape(), {dim}, keepdim));
        check_close(amax, f64(naive_reduce(v, x.shape(), {dim}, fold_argmax), amax.shape()), 0, 0);
        check_close(amin, f64(naive_reduce(v, x.shape(), {dim}, fold_argmin), amin.shape()), 0, 0);
      }
    }
  }
  const Tensor tied = f64({1, 5, 5, 0, 0, 5}, {6});
  CHECK(argmax(tied, 0).item<int64_t>() == 1);
  CHECK(argmin(tied, 0).item<int64_t>() == 3);
  CHECK(argmax(transpose(f64({1, 9, 8, 2}, {2, 2}), 0, 1), 1).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  Tensor x = f64({1, 2}, {2});
  x.set_requires_grad(true);
  CHECK_FALSE(argmax(x, 0).requires_grad());
}

// ---------------------------------------------------------------------------------------------
// Bad input

TEST_CASE("reductions reject bad dims, dtypes and arguments with the op's name") {
  const Tensor x = zeros({2, 3, 4}, {DType::Float64});
  for (const ReductionCase& c : reduction_cases()) {
    INFO(c.name);
    const std::string op = std::string(c.name).substr(0, std::string(c.name).find(' ')) + ": ";
    check_error([&] { c.op(x, {3}, KeepDim::No); }, {op, "dim 3 is out of range", "3 dims"});
    check_error([&] { c.op(x, {-4}, KeepDim::No); }, {op, "dim -4 is out of range"});
    check_error([&] { c.op(x, {1, -2}, KeepDim::No); }, {op, "dim 1 appears twice"});
    check_error([&] { c.op(Tensor(), {0}, KeepDim::No); }, {op, "undefined"});
  }
  const Tensor i = zeros({2, 3}, {DType::Int64});
  check_error([&] { mean(i, {0}); }, {"mean", "floating", "int64", "(2, 3)"});
  check_error([&] { logsumexp(i, {0}); }, {"logsumexp", "floating", "int64"});
  check_error([&] { var(i, {0}); }, {"var", "floating", "int64"});
  const Tensor b = from_vector<bool>({true, false}, {2});
  check_error([&] { sum(b); }, {"sum", "numeric", "bool"});
  check_error([&] { max(b); }, {"max", "numeric", "bool"});
  check_error([&] { argmax(b, 0); }, {"argmax", "numeric", "bool"});
  check_error([&] { var(x, {0}, KeepDim::No, -1); }, {"var", "correction", "-1"});
  check_error([&] { stddev(i, {0}); }, {"stddev", "floating", "int64"});
  check_error([&] { norm(i, 2, {0}); }, {"norm", "floating", "int64"});
  check_error([&] { norm(x, 3); }, {"norm", "p must be 1, 2 or inf, got 3", "float64", "(2, 3, 4)"});
  check_error([&] { norm(x, -kInf); }, {"norm", "p must be 1, 2 or inf", "-inf"});
  check_error([&] { argmax(x, 3); }, {"argmax", "dim 3 is out of range"});
  check_error([&] { argmin(x, -4); }, {"argmin", "dim -4 is out of range"});
}

// ---------------------------------------------------------------------------------------------
// std, norm and cumsum

TEST_CASE("std and the 2-norm give a zero (not NaN) gradient where the group is constant (zero)") {
  Tensor x = from_vector<double>({3, 3, 3, 0, 0, 0}, {2, 3});
  x.set_requires_grad(true);
  const Tensor s = stddev(x, {1});
  check_close(s, zeros({2}, {DType::Float64}));
  sum(s).backward();
  check_close(x.grad(), zeros({2, 3}, {DType::Float64}));
  x.zero_grad();
  const Tensor n = norm(x, 2, {1});
  check_close(n, f64({std::sqrt(27.0), 0}, {2}));
  sum(n).backward();
  check_close(x.grad(), f64({1 / std::sqrt(3.0), 1 / std::sqrt(3.0), 1 / std::sqrt(3.0), 0, 0, 0}, {2, 3}));
}

TEST_CASE("norm on known values, every element and along dims") {
  const Tensor x = f64({3, -4, 0, 1, -2, 2}, {2, 3});
  check_close(norm(x, 1), scalar(12.0, {DType::Float64}));
  check_close(norm(x), scalar(std::sqrt(34.0), {DType::Float64}));
  check_close(norm(x, kInf), scalar(4.0, {DType::Float64}));
  check_close(norm(x, 2, {1}), f64({5, 3}, {2}));
  check_close(norm(x, 1, {0}, KeepDim::Yes), f64({4, 6, 2}, {1, 3}));
  CHECK(norm(to(x, DType::Float32), kInf, {1}).dtype() == DType::Float32);
}

TEST_CASE("cumsum: values along any dim, integers exact, gradient the reversed running sum") {
  const Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  check_close(cumsum(x, 1), f64({1, 3, 6, 4, 9, 15}, {2, 3}));
  check_close(cumsum(x, 0), f64({1, 2, 3, 5, 7, 9}, {2, 3}));
  check_close(cumsum(x, -1), cumsum(x, 1));
  CHECK(cumsum(from_vector<int64_t>({1, -2, 3}, {3}), 0).to_vector<int64_t>() == std::vector<int64_t>{1, -1, 2});
  CHECK(cumsum(from_vector<int32_t>({5, 5}, {2}), 0).dtype() == DType::Int32);
  // int64 wraps as add does: max + 1 = min.
  const int64_t big = std::numeric_limits<int64_t>::max();
  CHECK(cumsum(from_vector<int64_t>({big, 1}, {2}), 0).to_vector<int64_t>() ==
        std::vector<int64_t>{big, std::numeric_limits<int64_t>::min()});
  // A middle dim of a non-contiguous input against a naive loop.
  const Tensor y = transpose(uniform({4, 3, 5}, 30), 0, 2);  // (5, 3, 4)
  const std::vector<double> v = contiguous(y).to_vector<double>(), c = cumsum(y, 1).to_vector<double>();
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t k = 0; k < 4; ++k) {
      double acc = 0;
      for (int64_t j = 0; j < 3; ++j) {
        acc += v[size_t((i * 3 + j) * 4 + k)];
        CHECK(std::abs(c[size_t((i * 3 + j) * 4 + k)] - acc) <= 1e-14);
      }
    }
  // dx_i = Σ_{j ≥ i} dy_j: with dy = 1, (3, 2, 1).
  Tensor leaf = f64({1, 2, 3}, {3});
  leaf.set_requires_grad(true);
  sum(cumsum(leaf, 0)).backward();
  check_close(leaf.grad(), f64({3, 2, 1}, {3}));
  check_gradients([](const Inputs& in) { return cumsum(in[0], 1); }, {uniform({2, 4, 3}, 31)});
  check_gradients([](const Inputs& in) { return cumsum(transpose(in[0], 0, 1), 0); }, {uniform({3, 5}, 32)});
  CHECK(cumsum(zeros({2, 0}), 1).shape() == Shape{2, 0});
  check_gradients([](const Inputs& in) { return cumsum(in[0], 0); }, {uniform({0, 3}, 33)});
  check_error([] { cumsum(scalar(1.0), 0); }, {"cumsum", "at least 1 dim", "0-d"});
  check_error([] { cumsum(zeros({2, 3}), 2); }, {"cumsum", "dim 2 is out of range", "2 dims"});
  check_error([] { cumsum(from_vector<bool>({true}, {1}), 0); }, {"cumsum", "numeric", "bool"});
  check_error([] { cumsum(Tensor(), 0); }, {"cumsum", "undefined"});
}
