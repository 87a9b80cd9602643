// Losses on the GPU against the CPU, forward and backward. Cross-entropy: every parity size along
// the classes and along the rows, int32 and int64 targets, ignore_index (some rows, a real class id,
// every row), label smoothing, 3-d and non-contiguous logits, logits of ±1e4, more rows than one
// grid, a loss with the same bits on every run, and out-of-range targets refused before anything is
// computed. Binary cross-entropy with logits: every parity size, the targets' gradient, non-contiguous
// operands, ±1e4, and a long input reduced in chunks.
#include <cstdint>
#include <string>

#include "tests/cuda/parity.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// e^x and log differ by an ulp or two between the devices; the row sums and the mean run in double,
// in different orders.
Tolerance loss_tol(DType dtype) { return dtype == DType::Float32 ? Tolerance{1e-6, 1e-5} : Tolerance{1e-13, 1e-11}; }

// R targets in [0, C), every `every`-th one (from the first) set to `ignore` (none when every = 0).
Tensor targets(int64_t R, int64_t C, uint64_t seed, DType dtype, int64_t every = 7, int64_t ignore = -100) {
  Generator gen(seed);
  std::vector<int64_t> t = randint(0, C, {R}, gen).to_vector<int64_t>();
  if (every > 0)
    for (int64_t r = 0; r < R; r += every) t[static_cast<size_t>(r)] = ignore;
  return to(from_vector<int64_t>(t, {R}), dtype);
}

void check_cross_entropy(const Tensor& logits, const Tensor& t, DType dtype, int64_t ignore_index, double eps) {
  INFO("logits " << to_string(logits.shape()) << " " << dtype << " targets " << t.dtype() << " ignore_index "
                 << ignore_index << " label_smoothing " << eps);
  check_parity([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1], ignore_index, eps); },
               {logits, t}, loss_tol(dtype));
}

}  // namespace

TEST_CASE("cross_entropy: every size along the classes and along the rows, smoothing, ignored rows") {
  uint64_t seed = 1;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (DType index_dtype : {DType::Int64, DType::Int32})
      for (double eps : {0.0, 0.1})
        for (int64_t n : parity_sizes()) {
          seed += 4;
          if (n > 0)  // at least one class
            check_cross_entropy(input({33, n}, seed, dtype, -4, 4), targets(33, n, seed + 1, index_dtype), dtype, -100, eps);
          check_cross_entropy(input({n, 33}, seed + 2, dtype, -4, 4), targets(n, 33, seed + 3, index_dtype), dtype, -100, eps);
        }
}

TEST_CASE("cross_entropy: ignore_index a real class, every row ignored, no rows, 3-d logits") {
  uint64_t seed = 100;
  for (DType dtype : {DType::Float32, DType::Float64}) {
    seed += 8;
    // padding token 0 as ignore_index: every 5th target and any drawn 0
    check_cross_entropy(input({1000, 31}, seed, dtype, -4, 4), targets(1000, 31, seed + 1, DType::Int64, 5, 0), dtype, 0, 0.2);
    // every row ignored: 0 and a zero gradient
    check_cross_entropy(input({33, 5}, seed + 2, dtype), full({33}, -100, {DType::Int64}), dtype, -100, 0.1);
    check_cross_entropy(input({0, 5}, seed + 3, dtype), zeros({0}, {DType::Int64}), dtype, -100, 0.0);
    // (B, S, C) with targets (B, S)
    check_cross_entropy(input({4, 33, 31}, seed + 4, dtype, -4, 4), reshape(targets(132, 31, seed + 5, DType::Int64), {4, 33}),
                        dtype, -100, 0.1);
  }
}

TEST_CASE("cross_entropy of non-contiguous logits and targets, of ±1e4, over more rows than one grid") {
  uint64_t seed = 200;
  // logits a transposed (C, R) leaf, targets a strided slice
  check_parity([](const std::vector<Tensor>& in) { return cross_entropy(transpose(in[0], 0, 1), slice(in[1], 0, 0, 66, 2), -100, 0.1); },
               {input({31, 33}, ++seed, DType::Float32, -4, 4), targets(66, 31, ++seed, DType::Int64)}, loss_tol(DType::Float32));
  for (DType dtype : {DType::Float32, DType::Float64}) {
    seed += 2;
    check_cross_entropy(input({33, 1000}, seed, dtype, -1e4, 1e4), targets(33, 1000, seed + 1, DType::Int64), dtype, -100, 0.1);
    const Tensor x = from_vector<double>({1e4, -1e4, 0.0, -1e4, -1e4, -1e4}, {2, 3});
    check_cross_entropy(to(x, dtype), from_vector<int64_t>({1, 2}, {2}), dtype, -100, 0.0);
    check_cross_entropy(to(x, dtype), from_vector<int64_t>({1, 2}, {2}), dtype, -100, 0.2);
  }
  check_cross_entropy(input({100000, 3}, seed + 2, DType::Float32, -4, 4), targets(100000, 3, seed + 3, DType::Int64),
                      DType::Float32, -100, 0.1);
}

TEST_CASE("cross_entropy on the device: the same bits on every run") {
  const Tensor logits = to(input({4097, 1000}, 300, DType::Float32, -4, 4), dut());
  const Tensor t = to(targets(4097, 1000, 301, DType::Int64), dut());
  Tensor first_loss, first_grad;
  for (int run = 0; run < 2; ++run) {
    Tensor leaf = clone(logits);
    leaf.set_requires_grad(true);
    const Tensor loss = cross_entropy(leaf, t, -100, 0.1);
    loss.backward();
    if (run == 0) {
      first_loss = loss, first_grad = leaf.grad();
    } else {
      expect_bitwise(loss, first_loss);
      expect_bitwise(leaf.grad(), first_grad);
    }
  }
}

TEST_CASE("cross_entropy on the device refuses out-of-range targets before computing anything") {
  Tensor logits = to(input({3, 4}, 400, DType::Float64), dut());
  logits.set_requires_grad(true);
  const std::vector<double> before = logits.to_vector<double>();
  Tape::current().clear();
  const auto on = [](std::vector<int64_t> v) { return to(from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}), dut()); };
  check_error([&] { cross_entropy(logits, on({0, 4, 1})); },
              {"cross_entropy", "target 4", "position (1,)", "4 classes", "ignore_index (-100)"});
  check_error([&] { cross_entropy(logits, on({-1, 0, 1})); }, {"cross_entropy", "target -1", "position (0,)"});
  check_error([&] { cross_entropy(logits, on({0, -100, 1}), -1); }, {"cross_entropy", "target -100"});
  check_error([&] { cross_entropy(logits, to(from_vector<int32_t>({0, 1, 9}, {3}), dut())); }, {"cross_entropy", "target 9", "position (2,)"});
  // Several bad targets among many ignored ones: the first is named.
  std::vector<int64_t> many(100000, -100);
  many[80000] = 7, many[70000] = 4, many[99999] = -5;
  const Tensor wide = to(input({100000, 4}, 401), dut());
  check_error([&] { cross_entropy(wide, on(many)); }, {"cross_entropy", "target 4", "position (70000,)"});
  CHECK(Tape::current().size() == 0);
  CHECK(logits.to_vector<double>() == before);
  CHECK_FALSE(logits.grad().defined());
  if (on_gpu()) check_error([&] { cross_entropy(logits, from_vector<int64_t>({0, 1, 2}, {3})); }, {"cross_entropy", "one device"});
}

TEST_CASE("binary_cross_entropy_with_logits: every size, both gradients, non-contiguous, ±1e4, long inputs") {
  uint64_t seed = 500;
  const auto bce = [](const std::vector<Tensor>& in) { return binary_cross_entropy_with_logits(in[0], in[1]); };
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : parity_sizes()) {
      INFO(dtype << " size " << n);
      check_parity(bce, {input({3, n}, ++seed, dtype, -4, 4), input({3, n}, ++seed, dtype, 0, 1)}, loss_tol(dtype));
    }
  for (Layout layout : all_layouts()) {
    INFO(layout_name(layout));
    check_parity([&](const std::vector<Tensor>& in) { return binary_cross_entropy_with_logits(view_as(layout, in[0], 37, 45), transpose(in[1], 0, 1)); },
                 {input(base_shape(layout, 37, 45), ++seed, DType::Float32, -4, 4), input({45, 37}, ++seed, DType::Float32, 0, 1)},
                 loss_tol(DType::Float32));
  }
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const Tensor x = from_vector<double>({1e4, -1e4, 1e4, -1e4}, {4}), t = from_vector<double>({1, 0, 0, 1}, {4});
    check_parity(bce, {to(x, dtype), to(t, dtype)}, loss_tol(dtype));
    check_parity(bce, {input({1 << 20}, ++seed, dtype, -1e4, 1e4), input({1 << 20}, ++seed, dtype, 0, 1)}, loss_tol(dtype));
  }
  check_error([&] { binary_cross_entropy_with_logits(to(input({2, 3}, 1), dut()), to(input({3, 2}, 2), dut())); },
              {"binary_cross_entropy_with_logits", "(3, 2)", "(2, 3)"});
}

TEST_CASE("nll_loss, mse_loss and kl_div: every size, both target dtypes, ignored rows, forward and backward") {
  uint64_t seed = 800;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : parity_sizes()) {
      if (n == 0) continue;  // classes: at least one
      INFO(dtype << " size " << n);
      for (DType index : {DType::Int64, DType::Int32})
        check_parity([](const std::vector<Tensor>& in) { return nll_loss(log_softmax(in[0]), in[1]); },
                     {input({9, n}, ++seed, dtype, -3, 3), targets(9, n, ++seed, index, 4)}, loss_tol(dtype));
      check_parity([](const std::vector<Tensor>& in) { return mse_loss(in[0], in[1]); },
                   {input({3, n}, ++seed, dtype), input({3, n}, ++seed, dtype)}, loss_tol(dtype));
      check_parity([](const std::vector<Tensor>& in) { return kl_div(log_softmax(in[0]), softmax(in[1])); },
                   {input({3, n}, ++seed, dtype, -3, 3), input({3, n}, ++seed, dtype, -3, 3)}, loss_tol(dtype));
    }
  check_error([] { nll_loss(to(zeros({2, 3}), dut()), to(from_vector<int64_t>({0, 3}, {2}), dut())); },
              {"nll_loss", "target 3", "out of range for 3 classes"});
}
