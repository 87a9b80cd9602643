// sort / argsort / topk on the GPU against the CPU: stability with many equal keys in both
// directions, NaN (of either sign and any payload) and −0.0 ordered exactly as on the CPU, every
// numeric dtype, every parity size, batched rows along any dim (few long rows, many short ones),
// non-contiguous inputs, empty tensors, top-k ties to the lower index, and the gradient of the values.
//
// Values and indices must agree exactly: the order is fully determined (ties by position), and the
// gradient is a scatter of dy, exact too.
#include <limits>

#include "tests/cuda/parity.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

const std::vector<DType> kNumeric{DType::Float32, DType::Float64, DType::Int32, DType::Int64};

// Small integers in the given dtype: many equal keys.
Tensor with_ties(const Shape& shape, uint64_t seed, DType dtype, int64_t distinct = 4) {
  return small_integers(shape, seed, dtype, -distinct / 2, distinct - distinct / 2);
}

// Sorting's three results for one direction, compared exactly: values (bit for bit), indices, and
// the gradient of the values (for floating inputs).
void check_sort(const Tensor& x, int64_t dim, Descending order) {
  INFO("shape " << to_string(x.shape()) << " " << x.dtype() << " dim " << dim
                << (order == Descending::Yes ? " descending" : " ascending"));
  check_values([=](const std::vector<Tensor>& in) { return sort(in[0], dim, order).indices; }, {x}, kExact);
  check_values([=](const std::vector<Tensor>& in) { return argsort(in[0], dim, order); }, {x}, kExact);
  {
    NoGradGuard no_grad;
    expect_bitwise(sort(to(x, dut()), dim, order).values, sort(x, dim, order).values);
  }
  if (is_floating(x.dtype()))
    check_parity([=](const std::vector<Tensor>& in) { return sort(in[0], dim, order).values; }, {x}, kExact);
}

void check_topk(const Tensor& x, int64_t k, int64_t dim, TopK which) {
  INFO("shape " << to_string(x.shape()) << " " << x.dtype() << " k " << k << " dim " << dim
                << (which == TopK::Largest ? " largest" : " smallest"));
  check_values([=](const std::vector<Tensor>& in) { return topk(in[0], k, dim, which).indices; }, {x}, kExact);
  if (is_floating(x.dtype()))
    check_parity([=](const std::vector<Tensor>& in) { return topk(in[0], k, dim, which).values; }, {x}, kExact);
  else
    check_values([=](const std::vector<Tensor>& in) { return topk(in[0], k, dim, which).values; }, {x}, kExact);
}

}  // namespace

TEST_CASE("sort is stable with many equal keys: every size, both directions, every numeric dtype") {
  uint64_t seed = 1;
  for (int64_t n : parity_sizes())
    for (DType dtype : kNumeric)
      for (Descending order : {Descending::No, Descending::Yes}) {
        check_sort(with_ties({n}, ++seed, dtype), 0, order);
        check_sort(with_ties({3, n}, ++seed, dtype), 1, order);  // batched rows
        check_sort(with_ties({n, 3}, ++seed, dtype), 0, order);  // along the outer dim
      }
}

TEST_CASE("sort of distinct values, of one equal key, and of the extremes of each dtype") {
  uint64_t seed = 100;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (Descending order : {Descending::No, Descending::Yes}) {
      check_sort(input({5, 4097}, ++seed, dtype, -1e6, 1e6), 1, order);
      check_sort(full({2, 1000}, 0.25, {dtype}), 1, order);
    }
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  for (Descending order : {Descending::No, Descending::Yes}) {
    check_sort(from_vector<int64_t>({hi, -1, lo, 0, 1, lo, hi, -1}, {8}), 0, order);
    check_sort(from_vector<int32_t>({2147483647, -1, -2147483647 - 1, 0, 1, 2147483647, -2147483647 - 1}, {7}), 0, order);
  }
}

TEST_CASE("NaN of either sign sorts last ascending and first descending; -0.0 equals +0.0") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  // NaNs of both signs, zeros of both signs, infinities, denormals, in a row with repeats
  const std::vector<double> values{2.0,  nan,  -0.0, -1.0, -nan, 0.0,  inf,  -inf, 4.9e-324, -0.0,
                                   nan,  1e-40, 2.0, -inf, 0.0,  -nan, -1e-40, inf, 1.0,  -0.0};
  const Tensor x = from_vector<double>(values, {4, 5});
  for (DType dtype : {DType::Float32, DType::Float64})
    for (Descending order : {Descending::No, Descending::Yes}) {
      const Tensor typed = to(x, dtype);
      check_sort(reshape(typed, {20}), 0, order);
      check_sort(typed, 1, order);
      check_sort(typed, 0, order);
    }
  // the same through top-k: the NaNs are the largest
  for (DType dtype : {DType::Float32, DType::Float64}) {
    check_topk(to(reshape(x, {20}), dtype), 5, 0, TopK::Largest);
    check_topk(to(reshape(x, {20}), dtype), 7, 0, TopK::Smallest);
  }
}

TEST_CASE("top-k: k of 0, 1, a few and all, largest and smallest, ties to the lower index") {
  uint64_t seed = 200;
  for (int64_t n : parity_sizes()) {
    if (n == 0) continue;
    for (DType dtype : kNumeric)
      for (int64_t k : {int64_t{0}, int64_t{1}, std::min<int64_t>(n, 5), n})
        for (TopK which : {TopK::Largest, TopK::Smallest}) {
          check_topk(with_ties({3, n}, ++seed, dtype), k, 1, which);
          check_topk(with_ties({n, 2}, ++seed, dtype), k, 0, which);
        }
  }
  // continuous values, the shape of clustered attention's top keys (clusters × keys)
  check_topk(input({100, 1000}, ++seed), 32, 1, TopK::Largest);
}

TEST_CASE("sort: few long rows, many short rows, rows of one, non-contiguous input, empty") {
  uint64_t seed = 300;
  for (Descending order : {Descending::No, Descending::Yes}) {
    check_sort(with_ties({2, 100000}, ++seed, DType::Float32, 1000), 1, order);
    check_sort(with_ties({30000, 7}, ++seed, DType::Int32, 3), 1, order);
    check_sort(with_ties({4097, 1}, ++seed, DType::Float64), 1, order);
    check_sort(with_ties({1, 4097}, ++seed, DType::Int64), 0, order);
  }
  // a transposed and a sliced view, and a 3-d tensor along its middle dim
  check_parity([](const std::vector<Tensor>& in) { return sort(transpose(in[0], 0, 1), 1).values; },
               {with_ties({33, 31}, ++seed, DType::Float32)}, kExact);
  check_values([](const std::vector<Tensor>& in) { return argsort(slice(in[0], 1, 1, 33, 3), 1, Descending::Yes); },
               {with_ties({31, 33}, ++seed, DType::Int64)}, kExact);
  check_sort(with_ties({5, 33, 7}, ++seed, DType::Float64), 1, Descending::Yes);
  check_sort(with_ties({5, 33, 7}, ++seed, DType::Float64), -1, Descending::No);
  // empty rows and no rows
  check_sort(zeros({3, 0}), 1, Descending::No);
  check_sort(zeros({0, 4}), 1, Descending::Yes);
  check_topk(zeros({0, 4}), 2, 1, TopK::Largest);
  check_error([] { sort(to(zeros({3}, {DType::Bool}), dut())); }, {"sort", "numeric", "bool"});
  check_error([] { topk(to(zeros({3, 5}), dut()), 6, 1); }, {"topk", "k = 6", "[0, 5]"});
}
