// Elementwise ops on the GPU against the CPU: unary and binary math (forward and backward; maximum /
// minimum with ties and NaN, clamp with tensor bounds) at every parity size and through transposed, sliced and expanded operands, broadcasting, integers,
// comparisons and logic, where / masked_fill, the in-place ops, and a map beyond one grid.
#include <functional>
#include <string>

#include "tests/cuda/parity.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

using UnaryFn = std::function<Tensor(const Tensor&)>;
using BinaryFn = std::function<Tensor(const Tensor&, const Tensor&)>;

struct Unary {
  const char* name;
  UnaryFn f;
  double lo, hi;  // an input range inside the op's domain, away from its kinks
};

const std::vector<Unary>& unary_ops() {
  static const std::vector<Unary> ops{
      {"neg", [](const Tensor& x) { return neg(x); }, -2, 2},
      {"abs", [](const Tensor& x) { return tapestry::abs(x); }, -2, 2},
      {"exp", [](const Tensor& x) { return tapestry::exp(x); }, -3, 3},
      {"log", [](const Tensor& x) { return tapestry::log(x); }, 0.1, 3},
      {"sqrt", [](const Tensor& x) { return tapestry::sqrt(x); }, 0.1, 3},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, 0.1, 3},
      {"tanh", [](const Tensor& x) { return tapestry::tanh(x); }, -3, 3},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, -8, 8},
      {"relu", [](const Tensor& x) { return relu(x); }, -1, 1},
      {"gelu", [](const Tensor& x) { return gelu(x); }, -3, 3},
      {"pow 2.5", [](const Tensor& x) { return tapestry::pow(x, 2.5); }, 0.1, 2},
      {"pow 0", [](const Tensor& x) { return tapestry::pow(x, 0.0); }, -1, 1},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.5); }, -1, 1},
      {"log1p", [](const Tensor& x) { return log1p(x); }, -0.5, 3},
      {"expm1", [](const Tensor& x) { return expm1(x); }, -3, 3},
      {"sin", [](const Tensor& x) { return tapestry::sin(x); }, -4, 4},
      {"cos", [](const Tensor& x) { return tapestry::cos(x); }, -4, 4},
      {"silu", [](const Tensor& x) { return silu(x); }, -8, 8},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.2); }, -1, 1},
      {"softplus", [](const Tensor& x) { return softplus(x); }, -30, 30},  // both sides of threshold 20
  };
  return ops;
}

struct Binary {
  const char* name;
  BinaryFn f;
  double a_lo, a_hi, b_lo, b_hi;
};

const std::vector<Binary>& binary_ops() {
  static const std::vector<Binary> ops{
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, -1, 1, -1, 1},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, -1, 1, -1, 1},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, -1, 1, -1, 1},
      {"div", [](const Tensor& a, const Tensor& b) { return tapestry::div(a, b); }, -1, 1, 0.5, 2},
      {"pow", [](const Tensor& a, const Tensor& b) { return tapestry::pow(a, b); }, 0.1, 2, -1, 2},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, -1, 1, -1, 1},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, -1, 1, -1, 1},
  };
  return ops;
}

const std::vector<DType> kFloating{DType::Float32, DType::Float64};
const std::vector<DType> kIntegers{DType::Int32, DType::Int64};
const std::vector<DType> kAll{DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool};

}  // namespace

TEST_CASE("unary ops: every size, float32 and float64, forward and backward") {
  uint64_t seed = 1;
  for (const Unary& op : unary_ops())
    for (DType dtype : kFloating)
      for (int64_t n : parity_sizes()) {
        INFO(op.name << " " << dtype << " size " << n);
        check_parity([&](const std::vector<Tensor>& in) { return op.f(in[0]); },
                     {input({n}, ++seed, dtype, op.lo, op.hi)}, tol(dtype));
      }
}

TEST_CASE("unary ops: transposed, sliced and expanded operands") {
  uint64_t seed = 100;
  for (const Unary& op : unary_ops())
    for (Layout layout : all_layouts()) {
      INFO(op.name << " " << layout_name(layout));
      check_parity([&](const std::vector<Tensor>& in) { return op.f(view_as(layout, in[0], 37, 45)); },
                   {input(base_shape(layout, 37, 45), ++seed, DType::Float32, op.lo, op.hi)},
                   tol(DType::Float32));
    }
}

TEST_CASE("neg and abs on integers") {
  for (DType dtype : kIntegers) {
    INFO(dtype);
    const Tensor x = small_integers({33, 7}, 5, dtype, -9, 9);
    check_values([](const std::vector<Tensor>& in) { return neg(in[0]); }, {x}, kExact);
    check_values([](const std::vector<Tensor>& in) { return tapestry::abs(in[0]); }, {x}, kExact);
  }
}

TEST_CASE("binary ops: every size, broadcasting, forward and backward") {
  const std::vector<std::pair<Shape, Shape>> shapes{
      {{0}, {0}}, {{1}, {1}}, {{31}, {31}}, {{33}, {33}}, {{1000}, {1000}}, {{4097}, {4097}},
      {{33}, {}}, {{}, {31}}, {{3, 1, 5}, {4, 1}}, {{2, 3, 4}, {3, 1}}, {{1}, {7}}, {{0, 3}, {1, 3}},
      {{5, 0}, {5, 1}}, {{1000, 1}, {1, 33}}};
  uint64_t seed = 200;
  for (const Binary& op : binary_ops())
    for (DType dtype : kFloating)
      for (const auto& [sa, sb] : shapes) {
        INFO(op.name << " " << dtype << " " << to_string(sa) << " with " << to_string(sb));
        check_parity([&](const std::vector<Tensor>& in) { return op.f(in[0], in[1]); },
                     {input(sa, ++seed, dtype, op.a_lo, op.a_hi), input(sb, ++seed, dtype, op.b_lo, op.b_hi)},
                     tol(dtype));
      }
}

TEST_CASE("binary ops: non-contiguous operands on either side") {
  uint64_t seed = 300;
  for (const Binary& op : binary_ops())
    for (Layout layout : all_layouts()) {
      INFO(op.name << " " << layout_name(layout));
      const auto fn = [&](const std::vector<Tensor>& in) {
        return op.f(view_as(layout, in[0], 37, 45), transpose(in[1], 0, 1));
      };
      check_parity(fn,
                   {input(base_shape(layout, 37, 45), ++seed, DType::Float32, op.a_lo, op.a_hi),
                    input({45, 37}, ++seed, DType::Float32, op.b_lo, op.b_hi)},
                   tol(DType::Float32));
      const auto swapped = [&](const std::vector<Tensor>& in) {
        return op.f(transpose(in[1], 0, 1), view_as(layout, in[0], 37, 45));
      };
      check_parity(swapped,
                   {input(base_shape(layout, 37, 45), ++seed, DType::Float32, op.b_lo, op.b_hi),
                    input({45, 37}, ++seed, DType::Float32, op.a_lo, op.a_hi)},
                   tol(DType::Float32));
    }
}

TEST_CASE("add, sub, mul, div on integers") {
  for (DType dtype : kIntegers) {
    INFO(dtype);
    const Tensor a = small_integers({4, 1, 33}, 7, dtype, -50, 50);
    const Tensor b = small_integers({5, 1}, 8, dtype, 1, 9);  // non-zero divisors
    const Tensor negative_b = neg(b);
    for (const Binary& op : binary_ops()) {
      if (std::string(op.name) == "pow") continue;  // floating only
      INFO(op.name);
      check_values([&](const std::vector<Tensor>& in) { return op.f(in[0], in[1]); }, {a, b}, kExact);
      check_values([&](const std::vector<Tensor>& in) { return op.f(in[0], in[1]); }, {a, negative_b}, kExact);
    }
  }
}

TEST_CASE("maximum / minimum ties and NaN; clamp with tensor bounds, forward and backward") {
  for (DType dtype : kFloating) {
    INFO(dtype);
    // Small integers as floats: ties on purpose, where the gradient is shared half and half.
    const Tensor a = to(small_integers({33, 7}, 11, DType::Int64, -3, 3), dtype);
    const Tensor b = to(small_integers({33, 7}, 12, DType::Int64, -3, 3), dtype);
    check_parity([](const std::vector<Tensor>& in) { return maximum(in[0], in[1]); }, {a, b}, kExact);
    check_parity([](const std::vector<Tensor>& in) { return minimum(in[0], in[1]); }, {a, b}, kExact);
    const Tensor with_nan = to(from_vector<double>({std::nan(""), 1, 2, std::nan("")}, {4}), dtype);
    const Tensor other = to(from_vector<double>({0, std::nan(""), 3, std::nan("")}, {4}), dtype);
    check_values([](const std::vector<Tensor>& in) { return maximum(in[0], in[1]); }, {with_nan, other}, kExact);
    check_values([](const std::vector<Tensor>& in) { return minimum(in[0], in[1]); }, {with_nan, other}, kExact);
    // Bounds broadcast against x; lo > hi in some columns.
    check_parity([](const std::vector<Tensor>& in) { return clamp(in[0], in[1], in[2]); },
                 {input({33, 45}, 13, dtype, -2, 2), input({45}, 14, dtype, -1, 0.5), input({33, 1}, 15, dtype, -0.5, 1)},
                 tol(dtype));
    check_values([](const std::vector<Tensor>& in) { return clamp(in[0], in[1], in[2]); },
                 {with_nan, other, to(full({4}, 2.5), dtype)}, kExact);
  }
}

TEST_CASE("comparisons on every dtype, with ties and broadcasting") {
  const std::vector<BinaryFn> compares{
      [](const Tensor& a, const Tensor& b) { return eq(a, b); }, [](const Tensor& a, const Tensor& b) { return ne(a, b); },
      [](const Tensor& a, const Tensor& b) { return lt(a, b); }, [](const Tensor& a, const Tensor& b) { return le(a, b); },
      [](const Tensor& a, const Tensor& b) { return gt(a, b); }, [](const Tensor& a, const Tensor& b) { return ge(a, b); }};
  for (DType dtype : kAll)
    for (size_t c = 0; c < compares.size(); ++c) {
      INFO(dtype << " comparison " << c);
      const Tensor a = small_integers({3, 1, 33}, 11, dtype), b = small_integers({4, 1}, 12, dtype);
      check_values([&](const std::vector<Tensor>& in) { return compares[c](in[0], in[1]); }, {a, b}, kExact);
      check_values([&](const std::vector<Tensor>& in) { return compares[c](transpose(in[0], 0, 2), in[1]); },
                   {a, small_integers({3}, 13, dtype)}, kExact);
    }
}

TEST_CASE("logical and, or, not") {
  const Tensor a = small_integers({31, 1}, 21, DType::Bool, 0, 2), b = small_integers({33}, 22, DType::Bool, 0, 2);
  check_values([](const std::vector<Tensor>& in) { return logical_and(in[0], in[1]); }, {a, b}, kExact);
  check_values([](const std::vector<Tensor>& in) { return logical_or(in[0], in[1]); }, {a, b}, kExact);
  check_values([](const std::vector<Tensor>& in) { return logical_not(in[0]); }, {b}, kExact);
  check_values([](const std::vector<Tensor>& in) { return logical_not(transpose(in[0], 0, 1)); }, {a}, kExact);
}

TEST_CASE("where and masked_fill, forward and backward, with broadcasting") {
  for (DType dtype : kFloating) {
    INFO(dtype);
    const Tensor cond = small_integers({4, 1, 33}, 31, DType::Bool, 0, 2);
    check_parity([](const std::vector<Tensor>& in) { return where(in[0], in[1], in[2]); },
                 {cond, input({1, 5, 1}, 32, dtype), input({}, 33, dtype)}, tol(dtype));
    check_parity([](const std::vector<Tensor>& in) { return where(in[0], transpose(in[1], 0, 1), in[2]); },
                 {small_integers({33, 1000}, 34, DType::Bool, 0, 2), input({1000, 33}, 35, dtype), input({1000}, 36, dtype)},
                 tol(dtype));
    check_parity([](const std::vector<Tensor>& in) { return masked_fill(in[0], in[1], -7.5); },
                 {input({31, 33}, 37, dtype), small_integers({33}, 38, DType::Bool, 0, 2)}, tol(dtype));
  }
  for (DType dtype : {DType::Int32, DType::Int64, DType::Bool}) {
    INFO(dtype);
    check_values([](const std::vector<Tensor>& in) { return where(in[0], in[1], in[2]); },
                 {small_integers({31, 1}, 39, DType::Bool, 0, 2), small_integers({33}, 40, dtype),
                  small_integers({31, 33}, 41, dtype)},
                 kExact);
  }
}

TEST_CASE("in place: add_, mul_, fill_ into contiguous, strided and sliced tensors") {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
    INFO(dtype);
    const Tensor buffer = small_integers({45, 37}, 51, dtype, -9, 9);
    const Tensor row = small_integers({45}, 52, dtype, -9, 9);
    const Tensor matrix = small_integers({37, 45}, 53, dtype, -9, 9);
    // add_ with a broadcast source, into the transpose of a buffer
    check_values([](const std::vector<Tensor>& in) {
      Tensor b = clone(in[0]);
      add_(transpose(b, 0, 1), in[1]);
      return b;
    }, {buffer, row}, kExact);
    // add_ of a transposed source into every other column
    check_values([](const std::vector<Tensor>& in) {
      Tensor b = clone(in[0]);
      add_(slice(b, 1, 0, 37, 2), slice(transpose(in[1], 0, 1), 1, 0, 37, 2));
      return b;
    }, {buffer, matrix}, kExact);
    // a source that shares the destination's memory (add_ reads it from a copy)
    check_values([](const std::vector<Tensor>& in) {
      Tensor b = clone(slice(in[0], 1, 0, 37));
      Tensor square = slice(b, 0, 0, 37);
      add_(square, transpose(square, 0, 1));
      return b;
    }, {buffer}, kExact);
    check_values([](const std::vector<Tensor>& in) {
      Tensor b = clone(in[0]);
      mul_(slice(transpose(b, 0, 1), 0, 1, 37, 3), 3.0);
      return b;
    }, {buffer}, kExact);
    check_values([](const std::vector<Tensor>& in) {
      Tensor b = clone(in[0]);
      fill_(slice(b, 0, 2, 40, 5), -4.0);
      fill_(select(b, 1, 3), 6.0);
      return b;
    }, {buffer}, kExact);
  }
  check_values([](const std::vector<Tensor>& in) {
    Tensor b = clone(in[0]);
    fill_(slice(b, 1, 0, 33, 2), 1.0);
    return b;
  }, {small_integers({31, 33}, 54, DType::Bool, 0, 2)}, kExact);
}

TEST_CASE("copy_: every dtype pair, broadcasting, strided destinations, across devices") {
  for (DType from : kAll)
    for (DType into : kAll) {
      INFO(from << " into " << into);
      // Fractional values (truncated into integers, non-zero into bool) unless the source is bool.
      const Tensor src = from == DType::Bool ? small_integers({45}, 61, DType::Bool, 0, 2)
                                             : to(input({45}, 61, DType::Float64, -5, 5), from);
      const Tensor dst = zeros({45, 37}, {into});
      check_values([](const std::vector<Tensor>& in) {
        Tensor d = clone(in[0]);
        copy_(transpose(d, 0, 1), in[1]);
        return d;
      }, {dst, src}, kExact);
      check_values([into](const std::vector<Tensor>& in) { return to(in[0], into); }, {src}, kExact);
    }
  // Host → device and device → host inside copy_, with a conversion on the way.
  check_values([](const std::vector<Tensor>& in) {
    Tensor d = clone(in[0]);
    copy_(slice(d, 0, 0, 45, 2), to(in[1], Device::cpu()));
    return d;
  }, {zeros({45, 37}, {DType::Float64}), input({37}, 62)}, kExact);
  check_values([](const std::vector<Tensor>& in) {
    Tensor host = zeros({37, 45}, {DType::Float32, Device::cpu()});
    copy_(host, transpose(in[0], 0, 1));
    return to(host, in[0].device());
  }, {input({45, 37}, 63, DType::Float32)}, kExact);
}

TEST_CASE("a map over 70 million elements (beyond one grid of the kernels)") {
  const int64_t n = 70'000'000;
  NoGradGuard no_grad;
  const Tensor x = arange(n, {DType::Int32, dut()});
  const Tensor y = to(x + scalar(1.0, {DType::Int32, dut()}), Device::cpu());
  const int32_t* values = y.data<int32_t>();
  int64_t wrong = 0, first_wrong = -1;
  for (int64_t i = 0; i < n; ++i)
    if (values[i] != static_cast<int32_t>(i + 1) && wrong++ == 0) first_wrong = i;
  INFO("first wrong element " << first_wrong);
  CHECK(wrong == 0);
}
