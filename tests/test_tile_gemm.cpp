// Fused attention's tile products (ops/tile_gemm.h): each element of C is exactly the fused
// multiply-add chain over p in order, scaled as documented, under AVX2 and AVX-512, and within
// BLAS's rounding at the baseline and in float64; shapes off the register blocks, transposed and
// strided operands, beta = 0 reads nothing, nothing outside C written; transpose_rows.
#include "tests/testing.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>

#include "core/cpu_capability.h"
#include "ops/tile_gemm.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

struct Product {
  int64_t m, n, k;
  bool transposed_a;  // A stored k × m (read with swapped strides), as fused attention's dV and dK products
  int64_t pad;        // extra elements at the end of each row of A, B and C
};

template <class T>
std::vector<T> random_values(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-2, 2);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(u(gen));
  return v;
}

// C as tile_gemm documents it, element by element: the chain fma(a_ip, b_pj, ·) over p = 0 … k − 1
// from 0, then alpha · sum, then + beta · c unless beta is 0.
template <class T>
void reference(const Product& x, T alpha, const T* a, int64_t a_row, int64_t a_col, const T* b, int64_t ldb, T beta,
               T* c, int64_t ldc) {
  for (int64_t i = 0; i < x.m; ++i)
    for (int64_t j = 0; j < x.n; ++j) {
      T acc = 0;
      for (int64_t p = 0; p < x.k; ++p) acc = std::fma(a[i * a_row + p * a_col], b[p * ldb + j], acc);
      T& out = c[i * ldc + j];
      out = beta == T(0) ? alpha * acc : alpha * acc + beta * out;
    }
}

// Runs one product under the capability in use and checks it against `reference`: to the bit where
// `exact`, else within the rounding of any order of summation (2k + 2 roundings of 2⁻²⁴ or 2⁻⁵³
// relative to the magnitudes summed); and that C's padding keeps its guard value.
template <class T>
void check_product(const Product& x, T alpha, T beta, bool exact) {
  const int64_t lda = (x.transposed_a ? x.m : x.k) + x.pad, ldb = x.n + x.pad, ldc = x.n + x.pad;
  const int64_t a_rows = x.transposed_a ? x.k : x.m;
  const std::vector<T> a = random_values<T>(size_t(std::max<int64_t>(1, a_rows * lda)), 1);
  const std::vector<T> b = random_values<T>(size_t(std::max<int64_t>(1, x.k * ldb)), 2);
  std::vector<T> c = random_values<T>(size_t(std::max<int64_t>(1, x.m * ldc)), 3);
  // beta = 0 must not read C: NaN there would show.
  if (beta == T(0)) std::fill(c.begin(), c.end(), std::numeric_limits<T>::quiet_NaN());
  for (int64_t i = 0; i < x.m; ++i)
    for (int64_t j = x.n; j < ldc; ++j) c[i * ldc + j] = T(12345);  // guards
  std::vector<T> want = c;
  const std::vector<T> original = c;
  const int64_t a_row = x.transposed_a ? 1 : lda, a_col = x.transposed_a ? lda : 1;
  reference(x, alpha, a.data(), a_row, a_col, b.data(), ldb, beta, want.data(), ldc);
  tile_gemm<T>(x.m, x.n, x.k, alpha, a.data(), a_row, a_col, b.data(), ldb, beta, c.data(), ldc);
  INFO("m " << x.m << " n " << x.n << " k " << x.k << (x.transposed_a ? " Aᵀ" : "") << " pad " << x.pad << " alpha "
            << alpha << " beta " << beta << " " << to_string(cpu_capability()) << (exact ? " (bits)" : ""));
  const double unit = std::is_same_v<T, float> ? std::ldexp(1.0, -24) : std::ldexp(1.0, -53);
  size_t differ = 0;
  for (int64_t i = 0; i < x.m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const size_t e = size_t(i * ldc + j);
      if (exact || j >= x.n) {
        differ += std::memcmp(&c[e], &want[e], sizeof(T)) != 0;
        continue;
      }
      double magnitude = beta == T(0) ? 0.0 : std::fabs(double(beta) * double(original[e]));
      for (int64_t p = 0; p < x.k; ++p)
        magnitude += std::fabs(double(alpha) * double(a[i * a_row + p * a_col]) * double(b[p * ldb + j]));
      differ += !(std::fabs(double(c[e]) - double(want[e])) <= double(2 * x.k + 4) * unit * (magnitude + 1e-300));
    }
  CHECK(differ == 0);
}

std::vector<Product> products() {
  std::vector<Product> all;
  // Off every register block (12, 8, 6 and 4 rows; 64, 32, 24, 16 and 8 columns), on them, empty,
  // single elements, and fused attention's own shapes (a 128 × 512 tile against head dims 32 and 64).
  for (int64_t m : {0, 1, 5, 7, 12, 13, 25})
    for (int64_t n : {0, 1, 8, 16, 17, 31, 32, 64, 65, 100})
      for (int64_t k : {0, 1, 3, 40}) all.push_back({m, n, k, (m + n + k) % 2 == 1, (n % 3) * 5});
  all.push_back({128, 512, 64, false, 16});
  all.push_back({128, 32, 512, false, 0});
  all.push_back({512, 64, 128, true, 0});
  return all;
}

}  // namespace

TEST_CASE("tile_gemm is the in-order fused multiply-add sum, to the bit, under AVX2 and AVX-512") {
  for (const CpuCapability capability : {CpuCapability::Avx2, CpuCapability::Avx512}) {
    if (capability > cpu_capability_supported()) continue;
    CpuCapabilityScope scope(capability);
    for (const Product& x : products()) {
      check_product<float>(x, 1.0f, 0.0f, true);
      check_product<float>(x, 0.125f, 1.0f, true);
      check_product<float>(x, -1.5f, 0.75f, true);
    }
  }
}

TEST_CASE("tile_gemm at the baseline and in float64 is BLAS's product, within its rounding") {
  CpuCapabilityScope scope(CpuCapability::Baseline);
  for (const Product& x : products()) {
    check_product<float>(x, 1.0f, 0.0f, false);
    check_product<float>(x, -1.5f, 0.75f, false);
    check_product<double>(x, 0.125, 1.0, false);
  }
}

TEST_CASE("tile_gemm refuses an A with no stride of 1") {
  const std::vector<float> a(16, 1.0f), b(16, 1.0f);
  std::vector<float> c(16);
  check_error([&] { tile_gemm<float>(2, 2, 2, 1.0f, a.data(), 4, 2, b.data(), 2, 0.0f, c.data(), 2); },
              {"tile_gemm", "stride 1", "4 and 2"});
}

TEST_CASE("tile_gemm's sum is within the float64 product's rounding bound") {
  // Against an exact-enough float64 product: |error| ≤ k · 2⁻²³ · Σ_p |a_ip b_pj| (each of the k
  // multiply-adds rounds once, relative error ≤ 2⁻²⁴, with room).
  const int64_t m = 37, n = 70, k = 300;
  const std::vector<float> a = random_values<float>(size_t(m * k), 4), b = random_values<float>(size_t(k * n), 5);
  std::vector<float> c(size_t(m * n));
  tile_gemm<float>(m, n, k, 1.0f, a.data(), k, 1, b.data(), n, 0.0f, c.data(), n);
  int64_t outside = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0, magnitude = 0;
      for (int64_t p = 0; p < k; ++p) {
        exact += double(a[i * k + p]) * double(b[p * n + j]);
        magnitude += std::fabs(double(a[i * k + p]) * double(b[p * n + j]));
      }
      outside += std::fabs(double(c[i * n + j]) - exact) > double(k) * std::ldexp(1.0, -23) * magnitude;
    }
  CHECK(outside == 0);
}

TEST_CASE("transpose_rows writes srcᵀ into a strided destination and nothing else, under every capability") {
  // Squares of 16 whole and cut on either side (AVX-512 transposes 16 × 16 in registers), at strides
  // that are not multiples of 16.
  const std::vector<std::pair<int64_t, int64_t>> shapes{{0, 3},  {1, 1},   {5, 17},  {16, 16},
                                                        {65, 16}, {33, 64}, {16, 65}, {512, 24}};
  for (const CpuCapability capability : {CpuCapability::Baseline, CpuCapability::Avx2, CpuCapability::Avx512}) {
    if (capability > cpu_capability_supported()) continue;
    CpuCapabilityScope scope(capability);
    for (const auto& [rows, cols] : shapes) {
      const int64_t ld_src = cols + 3, ld_dst = rows + 16;
      const std::vector<float> src = random_values<float>(size_t(std::max<int64_t>(1, rows * ld_src)), 6);
      std::vector<float> dst(size_t(cols * ld_dst), -7.0f);
      transpose_rows(rows, cols, src.data(), ld_src, dst.data(), ld_dst);
      int64_t wrong = 0;
      for (int64_t j = 0; j < cols; ++j)
        for (int64_t i = 0; i < ld_dst; ++i) wrong += dst[j * ld_dst + i] != (i < rows ? src[i * ld_src + j] : -7.0f);
      INFO(rows << " × " << cols << " under " << to_string(capability));
      CHECK(wrong == 0);
    }
  }
}
