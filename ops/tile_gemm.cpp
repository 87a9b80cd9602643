// Fused attention's tile products (ops/tile_gemm.h): a driver that cuts C into register blocks, and a
// kernel per CPU capability for one block. A block's accumulators stay in registers for the whole
// sum over p: per p, one row of B (a few vectors) and one broadcast element of A per row of C.
#include "ops/tile_gemm.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

#include "core/cpu_capability.h"
#include "core/error.h"
#include "ops/blas.h"

#if TP_CPU_DISPATCH
#include <immintrin.h>
#endif

namespace tapestry {

namespace {

// One block of C (rows × cols) with the rows of A and the columns of B it needs.
template <class T>
struct Block {
  int64_t rows, cols, k;
  T alpha, beta;
  const T* a;  // row i of the block at a + i · a_row, element p at + p · a_col
  int64_t a_row, a_col;
  const T* b;  // (k, cols), row stride ldb
  int64_t ldb;
  T* c;  // (rows, cols), row stride ldc
  int64_t ldc;
};

using Kernel = void (*)(const Block<float>&);

// How one capability cuts C: column blocks of up to `cols`, row blocks of up to rows(its width), and
// the kernel for a block's shape.
struct Blocking {
  int64_t (*rows)(int64_t cols);
  int64_t cols;
  Kernel (*kernel)(int64_t rows, int64_t cols, bool rows_of_a);  // rows_of_a: a_col = 1
};

#if TP_CPU_DISPATCH

// ---- AVX-512: blocks of 6 rows × 4 vectors of 16 (24 accumulators of the 32 registers), 8 × 2, 12 × 1 ----

// R rows × V vectors; columns of the last vector beyond x.cols are masked off. kRowsOfA: A's rows
// are contiguous (a_col = 1), else its columns (a_row = 1).
template <int R, int V, bool kRowsOfA>
TP_TARGET_AVX512 void block_avx512(const Block<float>& x) {
  const int64_t tail = x.cols - 16 * (V - 1);  // 1 … 16
  const __mmask16 last = static_cast<__mmask16>(tail >= 16 ? 0xFFFF : (1u << tail) - 1);
  const auto mask = [last](int v) { return v == V - 1 ? last : static_cast<__mmask16>(0xFFFF); };
  // The unroll pragmas let the compiler keep acc in registers (without them it stored acc to the
  // stack on every p and ran at half the speed).
  __m512 acc[R][V];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  // The strides in locals: read through x, they were loaded and multiplied again on every p (the
  // compiler could not tell that nothing in the loop writes them). A's element (r, p) is addressed
  // from few registers: with contiguous rows, from a base for every fourth row and the offsets of
  // the three between, each pointer stepping along p; with contiguous columns, as constant offsets
  // from one pointer stepping a column a p. A pointer a row (12 of them) left the loop too few
  // general registers, and it kept them on the stack (in a one-off profile the 12-row blocks ran at
  // about two thirds of the 6-row ones' rate).
  const int64_t k = x.k, ldb = x.ldb, a_row = x.a_row, a_col = x.a_col;
  const float* a_base[(R + 3) / 4];
#pragma GCC unroll 3
  for (int q = 0; q < (R + 3) / 4; ++q) a_base[q] = x.a + 4 * q * a_row;
  const float* b_at = x.b;
#pragma GCC unroll 2  // two p a pass: faster where k is long (the products over a key tile of 512)
  for (int64_t p = 0; p < k; ++p, b_at += ldb) {
    __m512 b[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) b[v] = _mm512_maskz_loadu_ps(mask(v), b_at + 16 * v);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const float* at = kRowsOfA ? a_base[r / 4] + (r % 4) * a_row + p : x.a + p * a_col + r;
      const __m512 a = _mm512_set1_ps(*at);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(a, b[v], acc[r][v]);
    }
  }
  // beta tested once, not at each of the block's vectors (where the compiler kept the test).
  const __m512 alpha = _mm512_set1_ps(x.alpha), beta = _mm512_set1_ps(x.beta);
  const bool add_c = x.beta != 0.0f;
  float* const c = x.c;
  const int64_t ldc = x.ldc;
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      float* cv = c + r * ldc + 16 * v;
      const __m512 y = _mm512_mul_ps(alpha, acc[r][v]);
      _mm512_mask_storeu_ps(cv, mask(v),
                            add_c ? _mm512_add_ps(y, _mm512_mul_ps(beta, _mm512_maskz_loadu_ps(mask(v), cv))) : y);
    }
}

// A block's rows for a column block `cols` wide: one or two vectors of columns leave most of the 32
// registers free, and more rows keep more independent sums in flight (a fused multiply-add takes four
// cycles and two issue per cycle, so fewer than eight sums leave the units idle). With 6 rows for every
// width, fused attention's forward in the speech recogniser's step (head dim 16) took 9 % longer a call
// (docs/PERFORMANCE.md).
int64_t avx512_rows(int64_t cols) { return cols <= 16 ? 12 : cols <= 32 ? 8 : 6; }

// The kernel of R rows (1 … sizeof...(Rs)) × V vectors.
template <int V, bool kRowsOfA, int... Rs>
Kernel avx512_of_rows(int64_t rows, std::integer_sequence<int, Rs...>) {
  static constexpr Kernel kernels[] = {block_avx512<Rs + 1, V, kRowsOfA>...};
  return kernels[std::min<int64_t>(rows, sizeof...(Rs)) - 1];
}

template <bool kRowsOfA>
Kernel avx512_kernel_of(int64_t rows, int64_t cols) {
  switch ((cols + 15) / 16) {
    case 1: return avx512_of_rows<1, kRowsOfA>(rows, std::make_integer_sequence<int, 12>{});
    case 2: return avx512_of_rows<2, kRowsOfA>(rows, std::make_integer_sequence<int, 8>{});
    case 3: return avx512_of_rows<3, kRowsOfA>(rows, std::make_integer_sequence<int, 6>{});
    default: return avx512_of_rows<4, kRowsOfA>(rows, std::make_integer_sequence<int, 6>{});
  }
}

Kernel avx512_kernel(int64_t rows, int64_t cols, bool rows_of_a) {
  return rows_of_a ? avx512_kernel_of<true>(rows, cols) : avx512_kernel_of<false>(rows, cols);
}

// ---- AVX2: blocks of 4 rows × 3 vectors of 8 (12 accumulators of the 16 registers) ----
// The AVX-512 kernel's loop again in AVX2's intrinsics: a function's target is fixed where it is
// written, so one template cannot serve both (the generic loop would not inline either's intrinsics).

template <int R, int V>
TP_TARGET_AVX2 void block_avx2(const Block<float>& x) {
  const int64_t tail = x.cols - 8 * (V - 1);  // 1 … 8: lanes below it are loaded and stored
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i last = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(tail)), lanes);
  const __m256i all = _mm256_set1_epi32(-1);
  __m256 acc[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = _mm256_setzero_ps();
  const int64_t k = x.k, ldb = x.ldb, a_row = x.a_row, a_col = x.a_col;  // as in block_avx512
  const float* a_at[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) a_at[r] = x.a + r * a_row;
  const float* b_at = x.b;
#pragma GCC unroll 2
  for (int64_t p = 0; p < k; ++p, b_at += ldb) {
    __m256 b[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) b[v] = _mm256_maskload_ps(b_at + 8 * v, v == V - 1 ? last : all);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_set1_ps(a_at[r][p * a_col]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[r][v] = _mm256_fmadd_ps(a, b[v], acc[r][v]);
    }
  }
  const __m256 alpha = _mm256_set1_ps(x.alpha), beta = _mm256_set1_ps(x.beta);
  const bool add_c = x.beta != 0.0f;
  float* const c = x.c;
  const int64_t ldc = x.ldc;
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      float* cv = c + r * ldc + 8 * v;
      const __m256i m = v == V - 1 ? last : all;
      const __m256 y = _mm256_mul_ps(alpha, acc[r][v]);
      _mm256_maskstore_ps(cv, m, add_c ? _mm256_add_ps(y, _mm256_mul_ps(beta, _mm256_maskload_ps(cv, m))) : y);
    }
}

template <int R>
Kernel avx2_of_width(int64_t cols) {
  switch ((cols + 7) / 8) {
    case 1: return block_avx2<R, 1>;
    case 2: return block_avx2<R, 2>;
    default: return block_avx2<R, 3>;
  }
}

int64_t avx2_rows(int64_t) { return 4; }

Kernel avx2_kernel(int64_t rows, int64_t cols, bool) {
  switch (rows) {
    case 1: return avx2_of_width<1>(cols);
    case 2: return avx2_of_width<2>(cols);
    case 3: return avx2_of_width<3>(cols);
    default: return avx2_of_width<4>(cols);
  }
}

// ---- transposes: a square of up to 16 × 16 in registers ----

// The rounds of transpose_square_avx512, w = 8, 4, 2, 1, as _mm512_permutex2var_ps takes them (lanes
// 16 … 31 name its second operand's): in each pair of rows (i, i + w) with i & w clear, row i keeps
// its lanes l with l & w clear and takes row (i + w)'s lane l − w for the others (upper); row i + w
// takes row i's lane l + w for the first and keeps its own (lower).
struct Exchange {
  alignas(64) int32_t upper[16];
  alignas(64) int32_t lower[16];
};
constexpr Exchange exchange_of(int w) {
  Exchange e{};
  for (int l = 0; l < 16; ++l) {
    e.upper[l] = l & w ? 16 + l - w : l;
    e.lower[l] = l & w ? 16 + l : l + w;
  }
  return e;
}
constexpr Exchange kExchanges[4] = {exchange_of(8), exchange_of(4), exchange_of(2), exchange_of(1)};

// src (rows × cols, both ≤ 16, row stride ld_src) transposed into dst (cols × rows, row stride
// ld_dst). The rows, loaded as 16 vectors, go through four rounds: the round of width w swaps the
// w × w blocks off the diagonal of each 2w × 2w block (kExchanges), and after w = 8, 4, 2, 1 vector j
// holds column j. The scalar loop, element by element, took 7 % of fused attention's forward and
// backward at 65 keys of a head of 16 (docs/PERFORMANCE.md).
TP_TARGET_AVX512 void transpose_square_avx512(int64_t rows, int64_t cols, const float* src, int64_t ld_src,
                                              float* dst, int64_t ld_dst) {
  const auto first = [](int64_t n) { return static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1); };
  const __mmask16 in = first(cols), out = first(rows);
  __m512 x[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) x[i] = i < rows ? _mm512_maskz_loadu_ps(in, src + i * ld_src) : _mm512_setzero_ps();
#pragma GCC unroll 4
  for (int round = 0; round < 4; ++round) {
    const int w = 8 >> round;
    const __m512i upper = _mm512_load_si512(kExchanges[round].upper);
    const __m512i lower = _mm512_load_si512(kExchanges[round].lower);
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      if (i & w) continue;
      const __m512 a = x[i], b = x[i + w];
      x[i] = _mm512_permutex2var_ps(a, upper, b);
      x[i + w] = _mm512_permutex2var_ps(a, lower, b);
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j)
    if (j < cols) _mm512_mask_storeu_ps(dst + j * ld_dst, out, x[j]);
}

#endif  // TP_CPU_DISPATCH

}  // namespace

template <class T>
void tile_gemm(int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t a_row, int64_t a_col, const T* b,
               int64_t ldb, T beta, T* c, int64_t ldc) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "tile_gemm takes float32 or float64");
  TP_CHECK(a_col == 1 || a_row == 1, "tile_gemm", "A needs rows or columns of stride 1, got strides ", a_row, " and ",
           a_col);
  if (m == 0 || n == 0) return;
#if TP_CPU_DISPATCH
  if constexpr (std::is_same_v<T, float>) {
    Blocking cut{nullptr, 0, nullptr};
    if (cpu_capability() == CpuCapability::Avx512) cut = {avx512_rows, 64, avx512_kernel};
    if (cpu_capability() == CpuCapability::Avx2) cut = {avx2_rows, 24, avx2_kernel};
    if (cut.kernel) {
      // Column blocks outside, row blocks inside: a block of B's columns (k × 64 at most) is read by
      // every row block while it is in L1.
      for (int64_t j = 0; j < n; j += cut.cols) {
        const int64_t cols = std::min(cut.cols, n - j), block_rows = cut.rows(cols);
        for (int64_t i = 0; i < m; i += block_rows) {
          const int64_t rows = std::min(block_rows, m - i);
          const Kernel kernel = cut.kernel(rows, cols, a_col == 1);
          kernel({rows, cols, k, alpha, beta, a + i * a_row, a_row, a_col, b + j, ldb, c + i * ldc + j, ldc});
        }
      }
      return;
    }
  }
#endif
  // The baseline's only fused multiply-add is libm's, a call per product: there, and in float64,
  // ops/blas.h's library (its own kernels and order of summation).
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  // BLAS reads A as stored row-major (a_col = 1) or transposed (a_row = 1). A stride that is never
  // stepped (one row, or one column) may be anything here; BLAS wants it at least the row's length.
  const bool trans_a = a_col != 1;
  const int64_t lda = trans_a ? (k == 1 ? std::max(a_col, m) : a_col) : (m == 1 ? std::max(a_row, k) : a_row);
  cpu_gemm<T>(trans_a, false, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <class T>
void transpose_rows(int64_t rows, int64_t cols, const T* src, int64_t ld_src, T* dst, int64_t ld_dst) {
  constexpr int64_t kSide = 16;  // squares of 16 × 16: each read and written a cache line at a time
#if TP_CPU_DISPATCH
  if constexpr (std::is_same_v<T, float>)
    if (cpu_capability() == CpuCapability::Avx512) {
      for (int64_t i0 = 0; i0 < rows; i0 += kSide)
        for (int64_t j0 = 0; j0 < cols; j0 += kSide)
          transpose_square_avx512(std::min(kSide, rows - i0), std::min(kSide, cols - j0), src + i0 * ld_src + j0,
                                  ld_src, dst + j0 * ld_dst + i0, ld_dst);
      return;
    }
#endif
  for (int64_t i0 = 0; i0 < rows; i0 += kSide)
    for (int64_t j0 = 0; j0 < cols; j0 += kSide) {
      const int64_t i1 = std::min(rows, i0 + kSide), j1 = std::min(cols, j0 + kSide);
      for (int64_t j = j0; j < j1; ++j)
        for (int64_t i = i0; i < i1; ++i) dst[j * ld_dst + i] = src[i * ld_src + j];
    }
}

template void tile_gemm<float>(int64_t, int64_t, int64_t, float, const float*, int64_t, int64_t, const float*,
                               int64_t, float, float*, int64_t);
template void tile_gemm<double>(int64_t, int64_t, int64_t, double, const double*, int64_t, int64_t,
                                const double*, int64_t, double, double*, int64_t);
template void transpose_rows<float>(int64_t, int64_t, const float*, int64_t, float*, int64_t);
template void transpose_rows<double>(int64_t, int64_t, const double*, int64_t, double*, int64_t);

}  // namespace tapestry
