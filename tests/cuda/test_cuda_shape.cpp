// The copy side of the shape ops on the GPU against the CPU, forward and backward: contiguous,
// clone, to(dtype), reshape of non-contiguous tensors, concat, stack, split, pad, and the views whose
// backward adds into a slice of a gradient (slice, select) or sums over broadcast dims (expand).
// Also moves between devices, with the gradient going back.
#include "tests/cuda/parity.h"

using namespace tapestry;
using namespace tapestry::testing;

TEST_CASE("contiguous, clone and reshape of views, every size") {
  uint64_t seed = 1;
  for (int64_t n : parity_sizes()) {
    INFO("size " << n);
    check_parity([](const std::vector<Tensor>& in) { return contiguous(transpose(in[0], 0, 1)); },
                 {input({3, n}, ++seed)}, kExact);
    check_parity([](const std::vector<Tensor>& in) { return clone(slice(in[0], 0, 0, in[0].size(0), 2)); },
                 {input({n, 3}, ++seed)}, kExact);
    check_parity([n](const std::vector<Tensor>& in) { return reshape(transpose(in[0], 0, 1), {n * 3}); },
                 {input({3, n}, ++seed)}, kExact);
  }
}

TEST_CASE("to(dtype) between every pair, with the gradient between floating types") {
  const std::vector<DType> all{DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool};
  for (DType from : all)
    for (DType into : all) {
      INFO(from << " to " << into);
      const Tensor x = from == DType::Bool ? small_integers({33, 31}, 1, DType::Bool, 0, 2)
                                           : to(input({33, 31}, 2, DType::Float64, -100, 100), from);
      check_parity([into](const std::vector<Tensor>& in) { return to(transpose(in[0], 0, 1), into); }, {x}, kExact);
    }
}

TEST_CASE("concat, stack, split and pad, forward and backward") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO(dtype);
    const Tensor a = input({31, 5}, 1, dtype), b = input({33, 5}, 2, dtype), c = input({0, 5}, 3, dtype);
    check_parity([](const std::vector<Tensor>& in) { return concat({in[0], in[1], in[2]}, 0); }, {a, b, c}, kExact);
    check_parity([](const std::vector<Tensor>& in) { return concat({transpose(in[0], 0, 1), transpose(in[1], 0, 1)}, 1); },
                 {a, b}, kExact);
    check_parity([](const std::vector<Tensor>& in) { return stack({in[0], in[1] * 2.0}, 1); },
                 {input({4, 33}, 4, dtype), input({4, 33}, 5, dtype)}, tol(dtype));
    check_parity([](const std::vector<Tensor>& in) {
      const std::vector<Tensor> parts = split(in[0], {10, 0, 21}, 0);
      return concat({parts[2] * 3.0, parts[0]}, 0);
    }, {a}, tol(dtype));
    check_parity([](const std::vector<Tensor>& in) { return pad(in[0], {1, 2, 0, 3}, -1.5); }, {b}, kExact);
    check_parity([](const std::vector<Tensor>& in) { return pad(transpose(in[0], 0, 1), {4097, 1}); }, {a}, kExact);
  }
}

TEST_CASE("views whose backward writes into part of a gradient") {
  const Tensor x = input({37, 45}, 1);
  // slice / select: dx[...] += dy into a strided part of the gradient buffer
  check_parity([](const std::vector<Tensor>& in) { return slice(in[0], 1, 3, 40, 3) * 2.0; }, {x}, tol(DType::Float32));
  check_parity([](const std::vector<Tensor>& in) { return select(in[0], 1, 7) + select(in[0], 1, 8); }, {x},
               tol(DType::Float32));
  check_parity([](const std::vector<Tensor>& in) { return slice(transpose(in[0], 0, 1), 0, 1, 45, 2) * in[0].size(0); },
               {x}, tol(DType::Float32));
  // expand / unsqueeze / permute: dx sums over the broadcast dims
  check_parity([](const std::vector<Tensor>& in) { return expand(unsqueeze(in[0], 1), {37, 4, 45}) * 1.5; }, {x},
               tol(DType::Float32));
  check_parity([](const std::vector<Tensor>& in) { return permute(in[0], {1, 0}) * in[0].size(1); }, {x}, tol(DType::Float32));
  // a fan-out: one tensor used three times, gradients summed
  check_parity([](const std::vector<Tensor>& in) {
    return in[0] * in[0] + transpose(tapestry::exp(transpose(in[0], 0, 1)), 0, 1);
  }, {x}, tol(DType::Float32));
}

TEST_CASE("moving between devices, with the gradient moving back") {
  if (!on_gpu()) {
    MESSAGE("skipped with --cpu-stand-in: needs two devices");
    return;
  }
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool}) {
    INFO(dtype);
    const Tensor x = dtype == DType::Bool ? small_integers({33, 31}, 1, DType::Bool, 0, 2)
                                          : to(input({33, 31}, 2, DType::Float64, -9, 9), dtype);
    const Tensor there = to(transpose(x, 0, 1), dut());
    CHECK(there.device() == dut());
    expect_bitwise(there, contiguous(transpose(x, 0, 1)));
    const Tensor back = to(there, Device::cpu());
    CHECK(back.device() == Device::cpu());
    CHECK(back.to_vector<double>() == contiguous(transpose(x, 0, 1)).to_vector<double>());
  }
  Tensor leaf = input({4, 5}, 3);
  leaf.set_requires_grad(true);
  const Tensor y = sum(to(leaf, dut()) * 3.0);
  CHECK(y.device() == dut());
  y.backward();
  REQUIRE(leaf.grad().defined());
  CHECK(leaf.grad().device() == Device::cpu());
  check_close(leaf.grad(), full({4, 5}, 3.0));
}

TEST_CASE("flip, roll, repeat, tril and triu: every size, forward and backward") {
  uint64_t seed = 600;
  for (int64_t n : parity_sizes()) {
    INFO("size " << n);
    check_parity([](const std::vector<Tensor>& in) { return flip(in[0], {0, 1}); }, {input({3, n}, ++seed)}, kExact);
    check_parity([](const std::vector<Tensor>& in) { return roll(in[0], {-2, 5}, {0, 1}); }, {input({3, n}, ++seed)},
                 kExact);
    check_parity([](const std::vector<Tensor>& in) { return repeat(transpose(in[0], 0, 1), {2, 1, 3}); },
                 {input({3, n}, ++seed)}, tol(DType::Float32));
    for (int64_t diagonal : {-2, 0, 3}) {
      check_parity([diagonal](const std::vector<Tensor>& in) { return tril(in[0], diagonal); }, {input({2, n, 7}, ++seed)},
                   kExact);
      check_parity([diagonal](const std::vector<Tensor>& in) { return triu(in[0], diagonal); }, {input({7, n}, ++seed)},
                   kExact);
    }
  }
  check_values([](const std::vector<Tensor>& in) { return flip(in[0], {1}); }, {small_integers({3, 33}, 1, DType::Int32)},
               kExact);
  check_values([](const std::vector<Tensor>& in) { return tril(in[0]); }, {small_integers({33, 31}, 2, DType::Bool, 0, 2)},
               kExact);
}
