// Dropout on the GPU against the CPU: the mask bit for bit (the same Philox blocks, the same
// comparison) for the same generator state, forward and backward, at every parity size, several p,
// float32 and float64, non-contiguous inputs, a tensor beyond one grid, the generator advanced alike,
// and eval mode; relu_dropout likewise.
#include <cstdint>

#include "tests/cuda/parity.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// dropout from a fixed generator state, so that every call (CPU, device, the suite's probe) draws
// the same mask; the state is not at offset 0 on purpose.
Tensor dropout_from(const Tensor& x, double p, uint64_t seed) {
  Generator gen(seed);
  gen.reserve(12345);
  return dropout(x, p, gen, Mode::Train);
}

}  // namespace

TEST_CASE("dropout: the CPU's mask bit for bit, forward and backward, every size and p") {
  uint64_t seed = 1;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (double p : {0.0, 0.1, 0.5, 0.9})
      for (int64_t n : parity_sizes()) {
        INFO(dtype << " p " << p << " size " << n);
        const uint64_t key = ++seed;
        // Inputs without zeros: a zero in the output means dropped.
        check_parity([&](const std::vector<Tensor>& in) { return dropout_from(in[0], p, key); },
                     {input({3, n}, ++seed, dtype, 1, 2)}, kExact);
      }
}

TEST_CASE("dropout of non-contiguous inputs and of a tensor beyond one grid") {
  uint64_t seed = 100;
  for (Layout layout : all_layouts()) {
    INFO(layout_name(layout));
    const uint64_t key = ++seed;
    check_parity([&](const std::vector<Tensor>& in) { return dropout_from(view_as(layout, in[0], 37, 45), 0.3, key); },
                 {input(base_shape(layout, 37, 45), ++seed, DType::Float32, 1, 2)}, kExact);
  }
  // More elements than 65536 blocks of 256 threads: the grid-stride loop takes a second round.
  const Shape big{(int64_t{1} << 24) + 4097};
  Generator cpu(77), gpu(77);
  const Tensor x = ones(big, {DType::Float32});
  const Tensor expected = dropout(x, 0.25, cpu, Mode::Train);
  expect_bitwise(dropout(to(x, dut()), 0.25, gpu, Mode::Train), expected);
  CHECK(gpu.offset() == cpu.offset());
  expect_bitwise(dropout(to(x, dut()), 0.25, gpu, Mode::Train), dropout(x, 0.25, cpu, Mode::Train));
}

TEST_CASE("dropout on the device: the generator advances as on the CPU; eval mode draws nothing") {
  Generator cpu(5), gpu(5);
  const Tensor x = input({33, 31}, 1, DType::Float32, 1, 2);
  const Tensor on_device = to(x, dut());
  for (int step = 0; step < 3; ++step) {
    INFO("draw " << step);
    expect_bitwise(dropout(on_device, 0.5, gpu, Mode::Train), dropout(x, 0.5, cpu, Mode::Train));
    CHECK(gpu.offset() == cpu.offset());
  }
  const Tensor same = dropout(on_device, 0.5, gpu, Mode::Eval);
  CHECK(same.impl_ptr() == on_device.impl_ptr());
  CHECK(gpu.offset() == cpu.offset());
  check_error([&] { dropout(on_device, 1.0, gpu, Mode::Train); }, {"dropout", "[0, 1)"});
  check_error([&] { dropout(to(ones({2}, {DType::Int64}), dut()), 0.5, gpu, Mode::Train); }, {"dropout", "floating"});
}

TEST_CASE("relu_dropout: the CPU's values and gradients bit for bit, every size") {
  // On the device it runs relu's kernel and then the mask's; its backward dropout's kernel on dy and
  // a select by y > 0 (ops/dropout.cpp). Inputs of both signs: relu zeroes the negative ones.
  uint64_t seed = 200;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : parity_sizes()) {
      INFO(dtype << " size " << n);
      const uint64_t key = ++seed;
      check_parity(
          [&](const std::vector<Tensor>& in) {
            Generator gen(key);
            gen.reserve(321);
            return relu_dropout(in[0], 0.3, gen, Mode::Train);
          },
          {input({3, n}, ++seed, dtype, -1, 2)}, kExact);
    }
}
