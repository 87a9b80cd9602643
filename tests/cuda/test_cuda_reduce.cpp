// Reductions on the GPU against the CPU: sum, mean, max, min, logsumexp, var, std, norm (forward and
// backward), cumsum, argmax / argmin, over every parity size, several dims with and without keepdim,
// non-contiguous inputs, ties, infinities and NaN, empty dims, integers, rows long enough to be cut
// into chunks, more rows than one grid, and a reduction over 70 million elements.
#include <functional>
#include <limits>
#include <string>

#include "tests/cuda/parity.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

using Reduction = std::function<Tensor(const Tensor&, const std::vector<int64_t>&, KeepDim)>;

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Named {
  const char* name;
  Reduction f;
};

const std::vector<Named>& differentiable() {
  static const std::vector<Named> ops{
      {"sum", [](const Tensor& x, const std::vector<int64_t>& d, KeepDim k) { return sum(x, d, k); }},
      {"mean", [](const Tensor& x, const std::vector<int64_t>& d, KeepDim k) { return mean(x, d, k); }},
      {"max", [](const Tensor& x, const std::vector<int64_t>& d, KeepDim k) { return tapestry::max(x, d, k); }},
      {"min", [](const Tensor& x, const std::vector<int64_t>& d, KeepDim k) { return tapestry::min(x, d, k); }},
      {"logsumexp", [](const Tensor& x, const std::vector<int64_t>& d, KeepDim k) { return logsumexp(x, d, k); }},
      {"var", [](const Tensor& x, const std::vector<int64_t>& d, KeepDim k) { return var(x, d, k); }},
      {"stddev", [](const Tensor& x, const std::vector<int64_t>& d, KeepDim k) { return stddev(x, d, k); }},
      {"norm 1", [](const Tensor& x, const std::vector<int64_t>& d, KeepDim k) { return norm(x, 1, d, k); }},
      {"norm 2", [](const Tensor& x, const std::vector<int64_t>& d, KeepDim k) { return norm(x, 2, d, k); }},
      {"norm inf", [](const Tensor& x, const std::vector<int64_t>& d, KeepDim k) { return norm(x, kInf, d, k); }},
  };
  return ops;
}

// Sums of many float32 terms accumulate in double on both devices, in different orders.
Tolerance reduce_tol(DType dtype) { return dtype == DType::Float32 ? Tolerance{1e-6, 1e-5} : Tolerance{1e-13, 1e-12}; }

}  // namespace

TEST_CASE("reductions of 1-d tensors of every size, forward and backward") {
  uint64_t seed = 1;
  for (const Named& op : differentiable())
    for (DType dtype : {DType::Float32, DType::Float64})
      for (int64_t n : parity_sizes()) {
        const std::string name = op.name;
        if (n == 0 && name != "sum") continue;       // max / min refuse an empty dim; mean / var are 0 / 0
        if (n == 1 && (name == "var" || name == "std")) continue;  // N − 1 = 0
        INFO(op.name << " " << dtype << " size " << n);
        check_parity([&](const std::vector<Tensor>& in) { return op.f(in[0], {0}, KeepDim::No); },
                     {input({n}, ++seed, dtype)}, reduce_tol(dtype));
      }
}

TEST_CASE("reductions over several dims, keepdim, non-contiguous inputs") {
  const std::vector<std::vector<int64_t>> dim_sets{{0}, {1}, {2}, {-1}, {0, 2}, {1, 2}, {0, 1, 2}, {}};
  uint64_t seed = 100;
  for (const Named& op : differentiable())
    for (const auto& dims : dim_sets)
      for (KeepDim keep : {KeepDim::No, KeepDim::Yes}) {
        if (dims.empty() && (std::string(op.name) == "var" || std::string(op.name) == "std")) continue;  // N = 1: 0 / 0
        INFO(op.name << " dims " << to_string(dims) << (keep == KeepDim::Yes ? " keepdim" : ""));
        check_parity([&](const std::vector<Tensor>& in) { return op.f(in[0], dims, keep); },
                     {input({7, 33, 5}, ++seed)}, reduce_tol(DType::Float32));
        // The same through a permuted view of a (5, 7, 33) leaf.
        check_parity([&](const std::vector<Tensor>& in) { return op.f(permute(in[0], {1, 2, 0}), dims, keep); },
                     {input({5, 7, 33}, ++seed)}, reduce_tol(DType::Float32));
      }
}

TEST_CASE("reductions of long rows (cut into chunks), many rows, and everything at once") {
  uint64_t seed = 200;
  for (const Named& op : differentiable()) {
    INFO(op.name);
    // 3 rows of 100,000: fewer rows than multiprocessors, so each row is reduced in chunks.
    check_parity([&](const std::vector<Tensor>& in) { return op.f(in[0], {1}, KeepDim::No); },
                 {input({3, 100000}, ++seed)}, reduce_tol(DType::Float32));
    // 100,000 rows of 3: more rows than one grid holds, reduced by a grid-stride loop over rows.
    check_parity([&](const std::vector<Tensor>& in) { return op.f(in[0], {1}, KeepDim::No); },
                 {input({100000, 3}, ++seed)}, reduce_tol(DType::Float32));
    // Everything, from a transposed view.
    check_parity([&](const std::vector<Tensor>& in) { return op.f(transpose(in[0], 0, 1), {0, 1}, KeepDim::No); },
                 {input({4097, 33}, ++seed, DType::Float64)}, reduce_tol(DType::Float64));
  }
}

TEST_CASE("max and min share the gradient among ties; argmax / argmin take the first") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO(dtype);
    const Tensor x = small_integers({31, 4097}, 7, dtype, 0, 5);  // many ties in every row
    for (int64_t dim : {0, 1}) {
      INFO("dim " << dim);
      check_parity([dim](const std::vector<Tensor>& in) { return tapestry::max(in[0], {dim}); }, {x}, tol(dtype));
      check_parity([dim](const std::vector<Tensor>& in) { return tapestry::min(in[0], {dim}); }, {x}, tol(dtype));
      check_values([dim](const std::vector<Tensor>& in) { return argmax(in[0], dim); }, {x}, kExact);
      check_values([dim](const std::vector<Tensor>& in) { return argmin(in[0], dim, KeepDim::Yes); }, {x}, kExact);
    }
  }
}

TEST_CASE("argmax and argmin: every size, every numeric dtype, transposed") {
  uint64_t seed = 300;
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int32, DType::Int64})
    for (int64_t n : parity_sizes()) {
      if (n == 0) continue;  // refused on both devices (tested below)
      INFO(dtype << " size " << n);
      const Tensor x = is_floating(dtype) ? input({3, n}, ++seed, dtype) : small_integers({3, n}, ++seed, dtype, -1000, 1000);
      check_values([](const std::vector<Tensor>& in) { return argmax(in[0], 1); }, {x}, kExact);
      check_values([](const std::vector<Tensor>& in) { return argmin(in[0], -1); }, {x}, kExact);
      check_values([](const std::vector<Tensor>& in) { return argmax(transpose(in[0], 0, 1), 0); }, {x}, kExact);
    }
}

TEST_CASE("integer sums, maxima and minima") {
  for (DType dtype : {DType::Int32, DType::Int64}) {
    INFO(dtype);
    const Tensor x = small_integers({33, 1000}, 17, dtype, -1000, 1000);
    for (int64_t dim : {0, 1}) {
      check_values([dim](const std::vector<Tensor>& in) { return sum(in[0], {dim}); }, {x}, kExact);
      check_values([dim](const std::vector<Tensor>& in) { return tapestry::max(in[0], {dim}); }, {x}, kExact);
      check_values([dim](const std::vector<Tensor>& in) { return tapestry::min(in[0], {dim}); }, {x}, kExact);
    }
    check_values([](const std::vector<Tensor>& in) { return sum(in[0]); }, {x}, kExact);
  }
}

TEST_CASE("logsumexp with infinite rows, max and min with NaN, as on the CPU") {
  // Row 0 all −inf, row 1 one +inf, row 2 finite with a −inf, row 3 finite.
  const Tensor x = from_vector<double>({-kInf, -kInf, -kInf, 1.0, kInf, 2.0, -kInf, 0.5, 3.0, 0.25, -1.0, 2.0},
                                       {4, 3});
  check_parity([](const std::vector<Tensor>& in) { return logsumexp(in[0], {1}); }, {x}, tol(DType::Float64));
  check_parity([](const std::vector<Tensor>& in) { return logsumexp(to(in[0], DType::Float32), {1}); }, {x},
               tol(DType::Float32));
  // NaN first in a row makes the CPU's max NaN; elsewhere it is skipped. The GPU must agree.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor y = from_vector<double>({nan, 1.0, 2.0, 1.0, nan, 2.0, 3.0, 2.0, nan}, {3, 3});
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO(dtype);
    check_values([dtype](const std::vector<Tensor>& in) { return tapestry::max(to(in[0], dtype), {1}); }, {y}, kExact);
    check_values([dtype](const std::vector<Tensor>& in) { return tapestry::min(to(in[0], dtype), {1}); }, {y}, kExact);
    check_values([dtype](const std::vector<Tensor>& in) { return argmax(to(in[0], dtype), 1); }, {y}, kExact);
    check_values([dtype](const std::vector<Tensor>& in) { return argmin(to(in[0], dtype), 1); }, {y}, kExact);
  }
}

TEST_CASE("empty tensors and empty dims") {
  check_parity([](const std::vector<Tensor>& in) { return sum(in[0], {1}); }, {input({3, 0}, 1)}, kExact);
  check_parity([](const std::vector<Tensor>& in) { return sum(in[0], {0}); }, {input({0, 4}, 2)}, kExact);
  check_parity([](const std::vector<Tensor>& in) { return logsumexp(in[0], {1}); }, {input({3, 0}, 3)}, kExact);
  check_parity([](const std::vector<Tensor>& in) { return sum(in[0]); }, {input({0}, 4)}, kExact);
  const Tensor empty_rows = to(zeros({3, 0}), dut());
  check_error([&] { tapestry::max(empty_rows, {1}); }, {"max", "empty dim", "(3, 0)"});
  check_error([&] { argmin(empty_rows, 1); }, {"argmin", "empty dim"});
  check_error([&] { sum(to(zeros({2}, {DType::Bool}), dut())); }, {"sum", "numeric", "bool"});
  check_error([&] { logsumexp(to(zeros({2}, {DType::Int32}), dut()), {0}); }, {"logsumexp", "floating"});
}

TEST_CASE("reductions of 70 million elements (beyond one grid, in chunks)") {
  const int64_t n = 70'000'000;
  NoGradGuard no_grad;
  const Tensor ones_ = ones({n}, {DType::Float32, dut()});
  CHECK(sum(ones_).item<double>() == static_cast<double>(n));  // exact: float32 holds 7e7, sums run in double
  const Tensor x = zeros({n}, {DType::Float32, dut()});
  fill_(slice(x, 0, 12'345'678, 12'345'679), 5.0);
  fill_(slice(x, 0, 65'000'001, 65'000'002), 5.0);  // a tie: the first wins
  CHECK(argmax(x, 0).item<int64_t>() == 12'345'678);
  CHECK(tapestry::max(x).item<double>() == 5.0);
}

TEST_CASE("cumsum: every size, every dim, integers, NaN; the gradient is the reversed running sum") {
  uint64_t seed = 500;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : parity_sizes()) {
      INFO(dtype << " size " << n);
      check_parity([](const std::vector<Tensor>& in) { return cumsum(in[0], 0); }, {input({n}, ++seed, dtype)},
                   reduce_tol(dtype));
    }
  for (int64_t dim : {0, 1, 2, -1}) {
    INFO("dim " << dim);
    check_parity([dim](const std::vector<Tensor>& in) { return cumsum(in[0], dim); }, {input({7, 33, 5}, ++seed)},
                 reduce_tol(DType::Float32));
    check_parity([dim](const std::vector<Tensor>& in) { return cumsum(permute(in[0], {1, 2, 0}), dim); },
                 {input({5, 7, 33}, ++seed)}, reduce_tol(DType::Float32));
  }
  // One float64 row added in the same order on both devices: the same bits.
  check_values([](const std::vector<Tensor>& in) { return cumsum(in[0], 1); }, {input({3, 4097}, ++seed, DType::Float64)},
               kExact);
  for (DType dtype : {DType::Int32, DType::Int64}) {
    INFO(dtype);
    check_values([](const std::vector<Tensor>& in) { return cumsum(in[0], 1); }, {small_integers({4, 1000}, 7, dtype, -9, 9)},
                 kExact);
  }
  const Tensor with_nan = from_vector<double>({1, std::nan(""), 2, 3}, {1, 4});
  check_values([](const std::vector<Tensor>& in) { return cumsum(in[0], 1); }, {with_nan}, kExact);
  check_values([](const std::vector<Tensor>& in) { return norm(in[0], 2, {1}); }, {with_nan}, kExact);
  // A zero row: the 2-norm's and std's gradient is 0 on both devices.
  check_parity([](const std::vector<Tensor>& in) { return norm(in[0] * 0.0, 2, {1}); }, {input({3, 5}, ++seed)}, kExact);
  check_parity([](const std::vector<Tensor>& in) { return stddev(in[0] * 0.0, {1}); }, {input({3, 5}, ++seed)},
               kExact);
}
