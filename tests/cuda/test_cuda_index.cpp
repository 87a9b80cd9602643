// Index ops on the GPU against the CPU: gather, scatter_add, index_select, index_add (forward and
// backward) and one_hot, at every parity size, along every dim, with int32 and int64 indices, many
// duplicates (all of src into one element included), non-contiguous operands, every dtype the ops
// accept, empty tensors, sizes beyond one grid, and out-of-range indices refused with nothing written.
//
// The accumulations add each output's contributions in the CPU's order (ops/cuda/index.cu), so every
// comparison here is exact, gradients included.
#include <string>

#include "tests/cuda/parity.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// Indices in [0, high) of `shape`, as `dtype`; empty when high = 0 (shape must then be empty).
Tensor indices(int64_t high, const Shape& shape, uint64_t seed, DType dtype = DType::Int64) {
  if (high == 0) return zeros(shape, {dtype});
  return small_integers(shape, seed, dtype, 0, high);
}

const std::vector<DType> kIndexTypes{DType::Int32, DType::Int64};

}  // namespace

TEST_CASE("gather and scatter_add: every size, both dims, duplicates, forward and backward") {
  uint64_t seed = 1;
  for (int64_t n : parity_sizes())
    for (DType itype : kIndexTypes)
      for (DType dtype : {DType::Float32, DType::Float64}) {
        INFO("size " << n << " index " << itype << " " << dtype);
        // dim 0: n + 2 indices per column into n rows (duplicates whenever n is small)
        const int64_t m = n == 0 ? 0 : n + 2;
        const Tensor x = input({n, 7}, ++seed, dtype);
        const Tensor rows = indices(n, {m, 7}, ++seed, itype);
        check_parity([](const std::vector<Tensor>& in) { return gather(in[0], 0, in[1]); }, {x, rows}, kExact);
        check_parity([](const std::vector<Tensor>& in) { return scatter_add(in[0], 0, in[1], in[2]); },
                     {x, rows, input({m, 7}, ++seed, dtype)}, kExact);
        // dim 1: 9 indices per row into 7 columns
        const Tensor cols = indices(7, {n, 9}, ++seed, itype);
        check_parity([](const std::vector<Tensor>& in) { return gather(in[0], 1, in[1]); }, {x, cols}, kExact);
        check_parity([](const std::vector<Tensor>& in) { return scatter_add(in[0], -1, in[1], in[2]); },
                     {x, cols, input({n, 9}, ++seed, dtype)}, kExact);
      }
}

TEST_CASE("gather and scatter_add: 3-d, index smaller than x outside dim, strided x") {
  uint64_t seed = 100;
  const Tensor x = input({6, 33, 5}, ++seed);
  for (int64_t dim = 0; dim < 3; ++dim) {
    INFO("dim " << dim);
    Shape shape{4, 31, 3};
    shape[dim] = 40;
    const Tensor index = indices(x.shape()[dim], shape, ++seed);
    check_parity([dim](const std::vector<Tensor>& in) { return gather(in[0], dim, in[1]); }, {x, index}, kExact);
    check_parity([dim](const std::vector<Tensor>& in) { return scatter_add(in[0], dim, in[1], in[2]); },
                 {x, index, input(shape, ++seed)}, kExact);
  }
  // x seen through a permutation, a slice and an expansion (gather reads any strides)
  const Tensor base = input({5, 33, 6}, ++seed);  // permuted to (6, 33, 5)
  const Tensor index = indices(33, {6, 50, 5}, ++seed);
  check_parity([](const std::vector<Tensor>& in) { return gather(permute(in[0], {2, 1, 0}), 1, in[1]); },
               {base, index}, kExact);
  check_parity([](const std::vector<Tensor>& in) { return gather(slice(in[0], 2, 1, 11, 2), 1, in[1]); },
               {input({6, 33, 11}, ++seed), index}, kExact);
  check_parity([](const std::vector<Tensor>& in) { return gather(expand(in[0], {6, 33, 5}), 1, in[1]); },
               {input({1, 33, 5}, ++seed), index}, kExact);
  // src and x through views too: scatter_add makes them contiguous
  check_parity([](const std::vector<Tensor>& in) {
    return scatter_add(transpose(in[0], 0, 1), 0, in[1], transpose(in[2], 0, 1));
  }, {input({5, 33}, ++seed), indices(33, {40, 5}, ++seed), input({5, 40}, ++seed)}, kExact);
}

TEST_CASE("scatter_add and gather's gradient: every element of src into one place, in order") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO(dtype);
    // 4097 float32 terms: any other order of additions would change the last bits
    const Tensor src = input({4097, 1}, 7, dtype, -1000, 1000);
    const Tensor x = input({3, 1}, 8, dtype);
    check_parity([](const std::vector<Tensor>& in) { return scatter_add(in[0], 0, in[1], in[2]); },
                 {x, zeros({4097, 1}, {DType::Int64}), src}, kExact);
    check_parity([](const std::vector<Tensor>& in) { return gather(in[0], 0, in[1]) * in[2]; },
                 {x, full({4097, 1}, 2.0, {DType::Int32}), src}, kExact);
  }
}

TEST_CASE("index_select and index_add: every size, every dim, repeated indices, forward and backward") {
  uint64_t seed = 200;
  for (int64_t n : parity_sizes())
    for (DType itype : kIndexTypes) {
      INFO("size " << n << " index " << itype);
      const Tensor x = input({3, n, 5}, ++seed);
      for (int64_t dim = 0; dim < 3; ++dim) {
        const int64_t size = x.shape()[dim];
        const int64_t m = size == 0 ? 0 : 2 * size + 1;  // more indices than rows: duplicates
        const Tensor index = indices(size, {m}, ++seed, itype);
        Shape shape = x.shape();
        shape[dim] = m;
        INFO("dim " << dim);
        check_parity([dim](const std::vector<Tensor>& in) { return index_select(in[0], dim, in[1]); }, {x, index},
                     kExact);
        check_parity([dim](const std::vector<Tensor>& in) { return index_add(in[0], dim, in[1], in[2]); },
                     {x, index, input(shape, ++seed)}, kExact);
      }
    }
  // strided operands, and float64
  const Tensor x = input({33, 31}, ++seed, DType::Float64);
  const Tensor index = indices(31, {100}, ++seed);
  check_parity([&](const std::vector<Tensor>& in) { return index_select(transpose(in[0], 0, 1), 0, in[1]); },
               {x, index}, kExact);
  check_parity([](const std::vector<Tensor>& in) { return index_add(transpose(in[0], 0, 1), 1, in[1], in[2]); },
               {input({33, 31}, ++seed, DType::Float64), indices(33, {100}, ++seed), input({31, 100}, ++seed, DType::Float64)},
               kExact);
  // an empty index selects nothing and adds nothing
  check_parity([](const std::vector<Tensor>& in) { return index_select(in[0], 1, in[1]); },
               {x, zeros({0}, {DType::Int64})}, kExact);
  check_parity([](const std::vector<Tensor>& in) { return index_add(in[0], 1, in[1], in[2]); },
               {x, zeros({0}, {DType::Int32}), zeros({33, 0}, {DType::Float64})}, kExact);
}

TEST_CASE("gather / index_select copy every dtype; scatter_add / index_add add integers") {
  uint64_t seed = 300;
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool}) {
    INFO(dtype);
    const Tensor x = dtype == DType::Bool ? small_integers({33, 31}, ++seed, DType::Bool, 0, 2)
                                          : to(input({33, 31}, ++seed, DType::Float64, -100, 100), dtype);
    check_values([](const std::vector<Tensor>& in) { return gather(in[0], 1, in[1]); },
                 {x, indices(31, {33, 40}, ++seed, DType::Int32)}, kExact);
    check_values([](const std::vector<Tensor>& in) { return index_select(in[0], 0, in[1]); },
                 {x, indices(33, {70}, ++seed)}, kExact);
  }
  for (DType dtype : {DType::Int32, DType::Int64}) {
    INFO(dtype);
    const Tensor x = small_integers({33, 31}, ++seed, dtype, -50, 50);
    const Tensor src = small_integers({70, 31}, ++seed, dtype, -50, 50);
    check_values([](const std::vector<Tensor>& in) { return scatter_add(in[0], 0, in[1], in[2]); },
                 {x, indices(33, {70, 31}, ++seed), src}, kExact);
    check_values([](const std::vector<Tensor>& in) { return index_add(in[0], 0, in[1], in[2]); },
                 {x, indices(33, {70}, ++seed), src}, kExact);
  }
}

TEST_CASE("one_hot: every size, both index types, several dtypes") {
  uint64_t seed = 400;
  for (int64_t n : parity_sizes())
    for (DType itype : kIndexTypes)
      for (DType dtype : {DType::Float32, DType::Int64, DType::Bool}) {
        INFO("size " << n << " " << itype << " -> " << dtype);
        check_values([dtype](const std::vector<Tensor>& in) { return one_hot(in[0], 37, dtype); },
                     {indices(37, {n, 3}, ++seed, itype)}, kExact);
      }
  check_values([](const std::vector<Tensor>& in) { return one_hot(in[0], 0); }, {zeros({0}, {DType::Int64})}, kExact);
  check_values([](const std::vector<Tensor>& in) { return one_hot(in[0], 5000); }, {indices(5000, {33}, 1)}, kExact);
}

TEST_CASE("index ops beyond one grid (17 million elements)") {
  const int64_t n = (int64_t{1} << 24) + 33;  // more than kMaxBlocks · kThreads
  NoGradGuard no_grad;
  const Tensor x = arange(n, {DType::Int64, dut()});
  const Tensor reversed = sub(full({n}, static_cast<double>(n - 1), {DType::Int64, dut()}), x);
  const Tensor y = gather(x, 0, reversed);
  CHECK(y.device() == dut());
  CHECK(select(y, 0, 0).item<int64_t>() == n - 1);
  CHECK(select(y, 0, n - 1).item<int64_t>() == 0);
  CHECK(sum(y).item<int64_t>() == n * (n - 1) / 2);
  // every element once, in reverse: each output gets exactly its own 1
  const Tensor counts = scatter_add(zeros({n}, {DType::Int64, dut()}), 0, reversed, ones({n}, {DType::Int64, dut()}));
  CHECK(tapestry::min(counts).item<int64_t>() == 1);
  CHECK(tapestry::max(counts).item<int64_t>() == 1);
}

TEST_CASE("out-of-range indices are refused before anything is written, with the CPU's message") {
  const Tensor x = to(input({2, 3}, 13, DType::Float64), dut()), src = to(input({2, 2}, 14, DType::Float64), dut());
  const std::vector<double> x_before = x.to_vector<double>(), src_before = src.to_vector<double>();
  for (int64_t bad : {-1, 3, 100}) {
    INFO("bad index " << bad);
    // the bad index is last, after valid ones that a kernel would have written already
    const Tensor index = to(from_vector<int64_t>({0, 1, 2, bad}, {2, 2}), dut());
    check_error([&] { gather(x, 1, index); }, {"gather", "index " + std::to_string(bad), "(1, 1)", "[0, 3)", "dim 1 of x (2, 3)"});
    check_error([&] { scatter_add(x, 1, index, src); }, {"scatter_add", "index " + std::to_string(bad), "out of range"});
    const Tensor rows = to(from_vector<int32_t>({0, 2, static_cast<int32_t>(bad)}, {3}), dut());
    check_error([&] { index_select(x, 1, rows); }, {"index_select", "index " + std::to_string(bad), "(2,)", "[0, 3)"});
    check_error([&] { index_add(x, 1, rows, to(input({2, 3}, 15, DType::Float64), dut())); },
                {"index_add", "out of range [0, 3)"});
    check_error([&] { one_hot(rows, 3); }, {"one_hot", "index " + std::to_string(bad), "3 classes"});
  }
  CHECK(x.to_vector<double>() == x_before);
  CHECK(src.to_vector<double>() == src_before);
  // Among many offenders spread over a long index, the first in row-major order is named.
  std::vector<int64_t> values(1'000'003, 1);
  values[700'001] = -5;
  values[900'000] = 7;
  values[999'999] = -1;
  const Tensor long_index = to(from_vector<int64_t>(values, {1'000'003}), dut());
  check_error([&] { index_select(x, 1, long_index); }, {"index -5 at (700001,)"});
  check_error([&] { one_hot(long_index, 3); }, {"index -5 at (700001,)", "3 classes"});
  // the device is still usable afterwards: no error was left behind
  check_parity([](const std::vector<Tensor>& in) { return index_add(in[0], 1, in[1], in[2]); },
               {input({2, 3}, 16), from_vector<int64_t>({2, 2, 0}, {3}), input({2, 3}, 17)}, kExact);
}

TEST_CASE("masked_select: every size, broadcast masks, forward and backward") {
  uint64_t seed = 700;
  for (int64_t n : parity_sizes()) {
    INFO("size " << n);
    const Tensor mask = small_integers({3, n}, ++seed, DType::Bool, 0, 2);
    check_parity([](const std::vector<Tensor>& in) { return masked_select(in[0], in[1]); }, {input({3, n}, ++seed), mask},
                 kExact);
    check_parity([](const std::vector<Tensor>& in) { return masked_select(in[0], in[1]); },
                 {input({n}, ++seed), small_integers({4, 1}, ++seed, DType::Bool, 0, 2)}, tol(DType::Float32));
  }
}
