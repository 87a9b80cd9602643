// Softmax and log-softmax on the GPU against the CPU, forward and backward: every parity size along
// the classes and along the rows, more rows than one grid, empty tensors, non-contiguous inputs,
// bool and additive masks (broadcast, strided, fully masked rows: zeros / −inf, never NaN), the
// additive mask's own gradient, and inputs of ±1e4.
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "tests/cuda/parity.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

using SoftmaxFn = Tensor (*)(const Tensor&, const Tensor&);

struct Kind {
  const char* name;
  SoftmaxFn f;
};

const std::vector<Kind>& kinds() {
  static const std::vector<Kind> k{{"softmax", &softmax}, {"log_softmax", &log_softmax}};
  return k;
}

// e^x differs by an ulp or two between CUDA's libm and the host's, and the rows' double sums run
// in another order.
Tolerance softmax_tol(DType dtype) { return dtype == DType::Float32 ? Tolerance{1e-6, 1e-5} : Tolerance{1e-14, 1e-12}; }

constexpr double kInf = std::numeric_limits<double>::infinity();

// No element of t is NaN.
void expect_no_nan(const Tensor& t) {
  int nans = 0;
  for (double v : t.to_vector<double>()) nans += std::isnan(v) ? 1 : 0;
  CHECK(nans == 0);
}

}  // namespace

TEST_CASE("softmax and log_softmax: every size along the classes and along the rows") {
  uint64_t seed = 1;
  for (const Kind& k : kinds())
    for (DType dtype : {DType::Float32, DType::Float64})
      for (int64_t n : parity_sizes()) {
        if (n == 0) continue;  // empty tensors: below
        INFO(k.name << " " << dtype << " size " << n);
        const auto fn = [&](const std::vector<Tensor>& in) { return k.f(in[0], Tensor()); };
        check_parity(fn, {input({33, n}, ++seed, dtype, -3, 3)}, softmax_tol(dtype));  // n classes
        check_parity(fn, {input({n, 33}, ++seed, dtype, -3, 3)}, softmax_tol(dtype));  // n rows
      }
}

TEST_CASE("softmax over more rows than one grid, over 1-d and 4-d tensors, and of empty tensors") {
  for (const Kind& k : kinds()) {
    INFO(k.name);
    const auto fn = [&](const std::vector<Tensor>& in) { return k.f(in[0], Tensor()); };
    check_parity(fn, {input({100000, 3}, 1)}, softmax_tol(DType::Float32));
    check_parity(fn, {input({4097}, 2, DType::Float64)}, softmax_tol(DType::Float64));
    check_parity(fn, {input({2, 3, 5, 7}, 3)}, softmax_tol(DType::Float32));
    check_parity(fn, {input({0, 5}, 4)}, kExact);
    check_parity(fn, {input({3, 0}, 5)}, kExact);
    check_parity(fn, {input({0}, 6)}, kExact);
  }
}

TEST_CASE("softmax of non-contiguous inputs") {
  uint64_t seed = 50;
  for (const Kind& k : kinds())
    for (Layout layout : all_layouts()) {
      INFO(k.name << " " << layout_name(layout));
      check_parity([&](const std::vector<Tensor>& in) { return k.f(view_as(layout, in[0], 37, 45), Tensor()); },
                   {input(base_shape(layout, 37, 45), ++seed, DType::Float32, -3, 3)}, softmax_tol(DType::Float32));
    }
}

TEST_CASE("softmax with bool masks: broadcast, strided, fully masked rows") {
  uint64_t seed = 100;
  for (const Kind& k : kinds())
    for (DType dtype : {DType::Float32, DType::Float64}) {
      INFO(k.name << " " << dtype);
      const auto fn = [&](const std::vector<Tensor>& in) { return k.f(in[0], in[1]); };
      // A key-padding mask (B, 1, 1, S) against scores (B, H, N, S), about a third masked.
      const Tensor keys = gt(uniform({3, 1, 1, 1000}, ++seed), scalar(-0.3, {DType::Float64}));
      check_parity(fn, {input({3, 2, 5, 1000}, ++seed, dtype, -3, 3), keys}, softmax_tol(dtype));
      // A causal mask (N, S) against (B, N, S), and one broadcast along the classes (N, 1).
      const Tensor causal = ge(reshape(arange(33, {DType::Int64}), {33, 1}), reshape(arange(33, {DType::Int64}), {1, 33}));
      check_parity(fn, {input({4, 33, 33}, ++seed, dtype, -3, 3), causal}, softmax_tol(dtype));
      const Tensor per_row = gt(uniform({33, 1}, ++seed), scalar(-0.5, {DType::Float64}));
      check_parity(fn, {input({4, 33, 4097}, ++seed, dtype, -3, 3), per_row}, softmax_tol(dtype));
      // Rows 0 and 2 fully masked: zeros (softmax) or −inf (log_softmax), no NaN, no gradient.
      const Tensor keep = from_vector<bool>({false, false, false, false, true, false, true, true,  //
                                             false, false, false, false, true, true, true, true},
                                            {4, 4});
      check_parity(fn, {input({4, 4}, ++seed, dtype), keep}, softmax_tol(dtype));
      Tensor x = to(input({4, 4}, ++seed, dtype), dut());
      x.set_requires_grad(true);
      const Tensor y = k.f(x, to(keep, dut()));
      expect_no_nan(y);
      y.backward(to(input({4, 4}, ++seed, dtype), dut()));
      expect_no_nan(x.grad());
      const std::vector<double> g = x.grad().to_vector<double>();
      for (size_t i : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{8}, size_t{9}, size_t{10}, size_t{11}})
        CHECK(g[i] == 0.0);
    }
}

TEST_CASE("softmax with a strided bool mask and a transposed input") {
  uint64_t seed = 200;
  for (const Kind& k : kinds()) {
    INFO(k.name);
    const Tensor keep = gt(uniform({45, 37}, ++seed), scalar(-0.5, {DType::Float64}));  // transposed below
    check_parity([&](const std::vector<Tensor>& in) { return k.f(transpose(in[0], 0, 1), transpose(in[1], 0, 1)); },
                 {input({45, 37}, ++seed, DType::Float32, -3, 3), keep}, softmax_tol(DType::Float32));
  }
}

TEST_CASE("softmax with additive masks: broadcast, −inf entries, and the mask's own gradient") {
  uint64_t seed = 300;
  for (const Kind& k : kinds())
    for (DType dtype : {DType::Float32, DType::Float64}) {
      INFO(k.name << " " << dtype);
      const auto fn = [&](const std::vector<Tensor>& in) { return k.f(in[0], in[1]); };
      // A learned bias (1, 1, S) broadcast over (B, N, S): both x and the bias get gradients.
      check_parity(fn, {input({3, 31, 1000}, ++seed, dtype, -3, 3), input({1, 1, 1000}, ++seed, dtype)},
                   softmax_tol(dtype));
      // A mask of 0 / −inf with a fully masked row (row 1), expanded over a batch.
      const Tensor minus_inf =
          from_vector<double>({0, -kInf, 0, 0, -kInf, -kInf, -kInf, -kInf, -kInf, 0, 0, -kInf}, {3, 4});
      check_parity(fn, {input({5, 3, 4}, ++seed, dtype), to(minus_inf, dtype)}, softmax_tol(dtype));
      const Tensor y = k.f(to(input({5, 3, 4}, ++seed, dtype), dut()), to(to(minus_inf, dtype), dut()));
      expect_no_nan(y);
    }
}

TEST_CASE("softmax and log_softmax of inputs of ±1e4") {
  uint64_t seed = 400;
  for (const Kind& k : kinds())
    for (DType dtype : {DType::Float32, DType::Float64}) {
      INFO(k.name << " " << dtype);
      const auto fn = [&](const std::vector<Tensor>& in) { return k.f(in[0], Tensor()); };
      check_parity(fn, {input({33, 1000}, ++seed, dtype, -1e4, 1e4)}, softmax_tol(dtype));
      const Tensor x = from_vector<double>({1e4, -1e4, 0.0, 1e4 - 1.0, -1e4, -1e4, -1e4, -1e4}, {2, 4});
      check_parity(fn, {to(x, dtype)}, softmax_tol(dtype));
      expect_no_nan(k.f(to(to(x, dtype), dut()), Tensor()));
    }
}

TEST_CASE("softmax on the device refuses what the CPU refuses") {
  const Tensor x = to(input({2, 3}, 1), dut());
  check_error([&] { softmax(x, to(ones({3, 3}, {DType::Bool}), dut())); }, {"softmax", "(3, 3)", "(2, 3)"});
  check_error([&] { log_softmax(x, to(ones({3}, {DType::Int32}), dut())); }, {"log_softmax", "mask", "int32"});
  check_error([&] { softmax(to(ones({2, 3}, {DType::Int64}), dut())); }, {"softmax", "floating", "int64"});
  if (on_gpu()) check_error([&] { softmax(x, ones({3}, {DType::Bool})); }, {"softmax", "one device"});
}
