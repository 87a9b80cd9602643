// pack_sign_bits and hamming_distance on the GPU against the CPU, bit for bit: R = 0, 1, 63 and 64
// bits (64 sets the sign of the int64 code), every parity size, float32 and float64, zero, negative
// and NaN entries, non-contiguous inputs, and Hamming distances with broadcasting over full 64-bit codes.
#include <limits>

#include "tests/cuda/parity.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// Normal-ish values with exact zeros, negative zeros and NaNs sprinkled in.
Tensor signs(const Shape& shape, uint64_t seed, DType dtype) {
  const Tensor x = input(shape, seed, DType::Float64);
  const Tensor pick = small_integers(shape, seed + 1, DType::Int64, 0, 10);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor special = where(eq(pick, scalar(0.0, {DType::Int64})), full({}, nan, {DType::Float64}),
                               where(eq(pick, scalar(1.0, {DType::Int64})), full({}, -0.0, {DType::Float64}),
                                     zeros({}, {DType::Float64})));
  return to(where(lt(pick, scalar(3.0, {DType::Int64})), special, x), dtype);
}

// Full 64-bit codes (negative ones included), made on the CPU.
Tensor codes(const Shape& shape, uint64_t seed) {
  Shape bits = shape;
  bits.push_back(64);
  return pack_sign_bits(input(bits, seed));
}

}  // namespace

TEST_CASE("pack_sign_bits: R = 0, 1, 63, 64, every size, zero / negative / NaN entries") {
  uint64_t seed = 1;
  for (int64_t n : parity_sizes())
    for (int64_t bits : {0, 1, 63, 64})
      for (DType dtype : {DType::Float32, DType::Float64}) {
        INFO("rows " << n << " R " << bits << " " << dtype);
        check_values([](const std::vector<Tensor>& in) { return pack_sign_bits(in[0]); },
                     {signs({n, bits}, ++seed, dtype)}, kExact);
      }
  // batched leading dims, and a transposed (G, R, N) leaf seen as (G, N, R)
  check_values([](const std::vector<Tensor>& in) { return pack_sign_bits(in[0]); },
               {signs({3, 33, 63}, ++seed, DType::Float32)}, kExact);
  check_values([](const std::vector<Tensor>& in) { return pack_sign_bits(transpose(in[0], 1, 2)); },
               {signs({3, 64, 1000}, ++seed, DType::Float64)}, kExact);
}

TEST_CASE("hamming_distance: every size, full 64-bit codes, broadcasting, views") {
  uint64_t seed = 100;
  for (int64_t n : parity_sizes()) {
    INFO("size " << n);
    check_values([](const std::vector<Tensor>& in) { return hamming_distance(in[0], in[1]); },
                 {codes({n}, ++seed), codes({n}, ++seed)}, kExact);
    // every query against every centroid: (n, 1) with (1, 33)
    check_values([](const std::vector<Tensor>& in) { return hamming_distance(in[0], in[1]); },
                 {codes({n, 1}, ++seed), codes({1, 33}, ++seed)}, kExact);
  }
  check_values([](const std::vector<Tensor>& in) { return hamming_distance(transpose(in[0], 0, 1), in[1]); },
               {codes({31, 33}, ++seed), codes({31}, ++seed)}, kExact);
  check_values([](const std::vector<Tensor>& in) { return hamming_distance(in[0], in[0]); }, {codes({1000}, ++seed)},
               kExact);
  check_error([] { hamming_distance(to(zeros({3}, {DType::Int64}), dut()), to(zeros({3}, {DType::Int32}), dut())); },
              {"hamming_distance", "int64", "int32"});
}
