// The host-side logic of the CUDA sort and k-means kernels, checked on the CPU (CI has no GPU): the
// radix keys the CUDA sort orders by (ops/cuda/sort.h) give exactly the CPU's stable order, NaN of
// either sign and payload, −0.0, infinities, denormals and integer extremes included; and the
// seeding rule of the CUDA k-means (ops/cuda/cluster.h) picks exactly the CPU's initial centroids.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "ops/cuda/cluster.h"
#include "ops/cuda/sort.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// The positions of values in a stable sort by radix key equal the CPU's argsort, both directions.
template <class T>
void check_keys(const std::vector<T>& values) {
  const int64_t n = static_cast<int64_t>(values.size());
  const Tensor x = from_vector<T>(values, {n});
  for (Descending order : {Descending::No, Descending::Yes}) {
    INFO(dtype_of<T>() << (order == Descending::Yes ? " descending" : " ascending") << ", " << n << " values");
    std::vector<int64_t> by_key(static_cast<size_t>(n));
    std::iota(by_key.begin(), by_key.end(), int64_t{0});
    std::stable_sort(by_key.begin(), by_key.end(), [&](int64_t a, int64_t b) {
      return cuda::radix_key(values[a], order) < cuda::radix_key(values[b], order);
    });
    CHECK(by_key == argsort(x, 0, order).to_vector<int64_t>());
  }
}

}  // namespace

TEST_CASE("radix keys order floats as the CPU's sort: NaN of either sign last, -0.0 equal to +0.0") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const double big = std::numeric_limits<double>::max(), tiny = std::numeric_limits<double>::denorm_min();
  std::vector<double> special{2.0,  nan,  -0.0, -1.0, -nan, 0.0,  inf,   -inf, tiny,  -0.0,  nan, 1e-40, 2.0,
                              -inf, 0.0,  -nan, -1e-40, inf, 1.0, -tiny, big,  -big, 0.0,  -0.0, 1e-310, -1e-310};
  // a NaN with another payload
  double payload = 0;
  const uint64_t bits = 0x7ff0000000000123ull;
  std::memcpy(&payload, &bits, sizeof payload);
  special.push_back(payload);
  special.push_back(-payload);
  check_keys(special);
  std::vector<float> as_float;  // out-of-range doubles become infinities (a plain cast is undefined)
  for (double v : special)
    as_float.push_back(std::abs(v) > std::numeric_limits<float>::max() ? static_cast<float>(std::copysign(inf, v))
                                                                       : static_cast<float>(v));
  check_keys(as_float);
  // many ties and random values
  Generator gen(5);
  check_keys(to(randint(-3, 3, {1000}, gen), DType::Float64).to_vector<double>());
  check_keys(rand({1000}, gen, {DType::Float32}).to_vector<float>());
  std::vector<double> mixed = (randn({500}, gen, {DType::Float64}) * 1e3).to_vector<double>();
  mixed.insert(mixed.end(), special.begin(), special.end());
  check_keys(mixed);
}

TEST_CASE("radix keys order integers as the CPU's sort, extremes included") {
  const int32_t lo32 = std::numeric_limits<int32_t>::min(), hi32 = std::numeric_limits<int32_t>::max();
  const int64_t lo64 = std::numeric_limits<int64_t>::min(), hi64 = std::numeric_limits<int64_t>::max();
  check_keys(std::vector<int32_t>{0, hi32, -1, lo32, 1, lo32, hi32, 0, -2});
  check_keys(std::vector<int64_t>{0, hi64, -1, lo64, 1, lo64, hi64, 0, int64_t{1} << 40, -(int64_t{1} << 40)});
  Generator gen(6);
  check_keys(randint(-5, 5, {1000}, gen, {DType::Int32}).to_vector<int32_t>());
  check_keys(randint(lo64 / 2, hi64 / 2, {1000}, gen, {DType::Int64}).to_vector<int64_t>());
}

TEST_CASE("k-means seeding: the valid query of each rank seeds the CPU's cluster, or none") {
  for (int64_t n = 1; n <= 300; ++n)
    for (int64_t m = 1; m <= n; ++m) {
      std::vector<int64_t> expected(static_cast<size_t>(n), -1);
      for (int64_t j = 0; j < m; ++j) expected[j * n / m] = j;  // the CPU: cluster j takes rank ⌊j·n/m⌋
      for (int64_t rank = 0; rank < n; ++rank) {
        if (cuda::seeded_cluster(rank, n, m) == expected[rank]) continue;
        INFO("n " << n << " m " << m << " rank " << rank);
        CHECK(cuda::seeded_cluster(rank, n, m) == expected[rank]);
      }
    }
  // large counts: no overflow in rank · m
  const int64_t n = 5'000'000'000, m = 1'000'000;
  CHECK(cuda::seeded_cluster(999'999 * n / m, n, m) == 999'999);
  CHECK(cuda::seeded_cluster(999'999 * n / m + 1, n, m) == -1);
}
