// Creation on the GPU against the CPU: full / zeros / ones / arange computed on the device, and the
// random draws: rand and randint bit for bit equal to the CPU's for the same generator state (same
// Philox blocks, exact conversions), randn within a few ulp (CUDA's log / cos are not the host's),
// and the generator advanced alike.
#include <cstdint>

#include "tests/cuda/parity.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {
const std::vector<DType> kAll{DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool};
const std::vector<Shape> kShapes{{}, {0}, {1}, {31}, {33}, {1000}, {4097}, {33, 31}, {2, 0, 3}, {1 << 22}};
}  // namespace

TEST_CASE("full, zeros, ones and the _like functions on the device") {
  for (DType dtype : kAll)
    for (const Shape& shape : kShapes) {
      INFO(dtype << " " << to_string(shape));
      const Options here{dtype, Device::cpu()}, there{dtype, dut()};
      expect_bitwise(full(shape, 2.75, there), full(shape, 2.75, here));
      expect_bitwise(zeros(shape, there), zeros(shape, here));
      expect_bitwise(ones(shape, there), ones(shape, here));
      const Tensor like = empty(shape, there);
      expect_bitwise(full_like(like, -3.5), full(shape, -3.5, here));
      expect_bitwise(zeros_like(like), zeros(shape, here));
    }
  check_error([&] { full({2, -1}, 1.0, {DType::Float32, dut()}); }, {"full", "negative size", "(2, -1)"});
}

TEST_CASE("arange on the device, bit for bit") {
  struct Range {
    double start, end, step;
  };
  const std::vector<Range> fractional{{-3, 7, 0.1}, {1, -1, -0.03}, {0.5, 1e6, 3.7}};
  const std::vector<Range> whole{{0, 0, 1}, {0, 1, 1}, {0, 4097, 1}, {-3, 7, 2}, {5, -5, -3}, {-1e6, 1e6, 977}};
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int32, DType::Int64})
    for (const std::vector<Range>* ranges : {&whole, &fractional}) {
      if (ranges == &fractional && is_integer(dtype)) continue;  // refused on every device
      for (const Range& r : *ranges) {
        INFO(dtype << " [" << r.start << ", " << r.end << ") step " << r.step);
        expect_bitwise(arange(r.start, r.end, r.step, {dtype, dut()}), arange(r.start, r.end, r.step, {dtype, Device::cpu()}));
      }
    }
  check_error([] { arange(70, {DType::Bool, dut()}); }, {"arange", "bool"});
  check_error([] { arange(0.0, 2.0, 0.5, {DType::Int32, dut()}); }, {"arange", "whole start and step"});
}

TEST_CASE("rand and randint: bit for bit the CPU's draws for the same generator state") {
  for (const Shape& shape : kShapes)
    for (uint64_t seed : {uint64_t{0}, uint64_t{42}, uint64_t{0xDEADBEEFCAFEF00Dull}}) {
      INFO(to_string(shape) << " seed " << seed);
      for (DType dtype : {DType::Float32, DType::Float64}) {
        Generator cpu(seed), gpu(seed);
        cpu.set_state(seed, 12345), gpu.set_state(seed, 12345);
        expect_bitwise(rand(shape, gpu, {dtype, dut()}), rand(shape, cpu, {dtype, Device::cpu()}));
        CHECK(gpu.offset() == cpu.offset());
        // a second draw continues from the advanced offset on both
        expect_bitwise(rand(shape, gpu, {dtype, dut()}), rand(shape, cpu, {dtype, Device::cpu()}));
      }
      for (DType dtype : {DType::Int32, DType::Int64, DType::Float32, DType::Float64}) {
        Generator cpu(seed), gpu(seed);
        expect_bitwise(randint(-7, 13, shape, gpu, {dtype, dut()}), randint(-7, 13, shape, cpu, {dtype, Device::cpu()}));
        CHECK(gpu.offset() == cpu.offset());
      }
      Generator cpu(seed), gpu(seed);
      const int64_t wide = int64_t{1} << 40;  // needs the full 64 random bits of a block
      expect_bitwise(randint(-wide, wide, shape, gpu, {DType::Int64, dut()}),
                     randint(-wide, wide, shape, cpu, {DType::Int64, Device::cpu()}));
    }
}

TEST_CASE("randn: the CPU's draws within a few ulp, the generator advanced alike") {
  for (const Shape& shape : kShapes)
    for (DType dtype : {DType::Float32, DType::Float64}) {
      INFO(to_string(shape) << " " << dtype);
      Generator cpu(7), gpu(7);
      const Tolerance ulps = dtype == DType::Float32 ? Tolerance{1e-6, 1e-6} : Tolerance{1e-14, 1e-14};
      expect_close(randn(shape, gpu, {dtype, dut()}), randn(shape, cpu, {dtype, Device::cpu()}), ulps);
      CHECK(gpu.offset() == cpu.offset());
    }
}

TEST_CASE("random draws refuse what the CPU refuses") {
  Generator gen(1);
  check_error([&] { rand({3}, gen, {DType::Int32, dut()}); }, {"rand", "floating", "int32"});
  check_error([&] { randn({3}, gen, {DType::Bool, dut()}); }, {"randn", "floating", "bool"});
  check_error([&] { randint(3, 3, {3}, gen, {DType::Int64, dut()}); }, {"randint", "low < high"});
  check_error([&] { randint(0, 2, {3}, gen, {DType::Bool, dut()}); }, {"randint", "bool"});
}
