#include <limits>

#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// Bit r of the code is [x[r] > 0], built one bit at a time.
uint64_t naive_code(const std::vector<double>& row) {
  uint64_t code = 0;
  for (size_t r = 0; r < row.size(); ++r)
    if (row[r] > 0) code += uint64_t{1} << r;
  return code;
}

// Differing bits, counted one at a time.
int64_t naive_hamming(int64_t a, int64_t b) {
  int64_t count = 0;
  for (int r = 0; r < 64; ++r) count += ((static_cast<uint64_t>(a) >> r) & 1) != ((static_cast<uint64_t>(b) >> r) & 1);
  return count;
}

}  // namespace

TEST_CASE("pack_sign_bits matches a naive bit loop for R = 1, 63, 64") {
  for (int64_t bits : {1, 5, 63, 64}) {
    INFO("R = " << bits);
    for (DType dtype : {DType::Float32, DType::Float64}) {
      const Tensor x = to(uniform({3, 4, bits}, 100 + bits), dtype);
      const Tensor codes = pack_sign_bits(x);
      CHECK(codes.dtype() == DType::Int64);
      CHECK(codes.shape() == Shape{3, 4});
      const std::vector<double> v = x.to_vector<double>();
      const std::vector<int64_t> got = codes.to_vector<int64_t>();
      for (int64_t m = 0; m < 12; ++m) {
        const std::vector<double> row(v.begin() + m * bits, v.begin() + (m + 1) * bits);
        CHECK(static_cast<uint64_t>(got[m]) == naive_code(row));
      }
    }
  }
  // all 64 bits set is -1 as an int64; bit 63 alone is the most negative int64
  CHECK(pack_sign_bits(ones({64})).item<int64_t>() == -1);
  std::vector<double> top(64, -1.0);
  top[63] = 1.0;
  CHECK(pack_sign_bits(from_vector<double>(top, {64})).item<int64_t>() == std::numeric_limits<int64_t>::min());
}

TEST_CASE("pack_sign_bits: zero, negative and NaN leave a bit clear; bit r has value 2^r") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = from_vector<double>({0.5, 0.0, -0.0, -2, nan, 1e-300}, {6});
  CHECK(pack_sign_bits(x).item<int64_t>() == (1 << 0) + (1 << 5));
  // a large batch, for the parallel path
  Generator gen(1);
  const Tensor big = randn({4096, 32}, gen);
  const std::vector<float> v = big.to_vector<float>();
  const std::vector<int64_t> codes = pack_sign_bits(big).to_vector<int64_t>();
  bool same = true;
  for (int64_t m = 0; m < 4096; ++m)
    same = same && static_cast<uint64_t>(codes[m]) == naive_code(std::vector<double>(v.begin() + m * 32, v.begin() + (m + 1) * 32));
  CHECK(same);
  CHECK(pack_sign_bits(zeros({3, 0})).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0});
}

TEST_CASE("hamming_distance counts differing bits, with broadcasting") {
  for (int64_t bits : {1, 63, 64}) {
    INFO("R = " << bits);
    const Tensor a = pack_sign_bits(uniform({5, 1, bits}, 200 + bits));  // (5, 1)
    const Tensor b = pack_sign_bits(uniform({1, 7, bits}, 300 + bits));  // (1, 7)
    const Tensor d = hamming_distance(a, b);
    CHECK(d.dtype() == DType::Int64);
    CHECK(d.shape() == Shape{5, 7});
    const std::vector<int64_t> av = a.to_vector<int64_t>(), bv = b.to_vector<int64_t>(), dv = d.to_vector<int64_t>();
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 7; ++j) {
        CHECK(dv[i * 7 + j] == naive_hamming(av[i], bv[j]));
        CHECK(dv[i * 7 + j] <= bits);
      }
  }
  const Tensor extremes = from_vector<int64_t>({0, -1, std::numeric_limits<int64_t>::min()}, {3});
  CHECK(hamming_distance(extremes, scalar(0, {DType::Int64})).to_vector<int64_t>() == std::vector<int64_t>{0, 64, 1});
  CHECK(hamming_distance(extremes, extremes).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0});
}

TEST_CASE("pack_sign_bits and hamming_distance refuse bad arguments") {
  check_error([] { pack_sign_bits(zeros({2, 65})); }, {"pack_sign_bits", "R = 65", "(2, 65)", "at most 64"});
  check_error([] { pack_sign_bits(zeros({2, 8}, {DType::Int64})); }, {"pack_sign_bits", "floating", "int64"});
  check_error([] { pack_sign_bits(scalar(1.0)); }, {"pack_sign_bits", "0-d"});
  const Tensor codes = zeros({3}, {DType::Int64});
  check_error([&] { hamming_distance(codes, zeros({3}, {DType::Int32})); }, {"hamming_distance", "int64", "int32"});
  check_error([&] { hamming_distance(zeros({3}), codes); }, {"hamming_distance", "float32"});
  check_error([&] { hamming_distance(codes, zeros({4}, {DType::Int64})); }, {"hamming_distance", "(3,)", "(4,)", "broadcast"});
}
