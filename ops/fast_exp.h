/// @file
/// e^x for the x ≤ 0 of a softmax row (x − max), in a form the compiler vectorises: libm's expf is
/// a call per element, which kept softmax loops scalar and made them a sixth of a full-attention
/// layer's time on the CPU. And ln x on [1, 4), for the log-sum-exps of a few such terms (CTC).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/cpu_capability.h"

#if TP_CPU_DISPATCH
#include <immintrin.h>
#endif

namespace tapestry {

/// a · b + c, rounded once (std::fma) where `fused`, else twice: the one form exp_nonpositive_as
/// writes both of its variants in.
template <bool fused>
[[gnu::always_inline]] inline float multiply_add(float a, float b, float c) {
  if constexpr (fused)
    return std::fma(a, b, c);
  else
    return a * b + c;
}

/// The constants of exp_nonpositive_as and its vector form exp_nonpositive_avx512.
namespace fast_exp {
constexpr float kLog2e = 1.44269504088896341f;  ///< 1 / ln 2
constexpr float kLn2Hi = 0.693359375f;          ///< ln 2 to 10 bits: n · kLn2Hi is exact
constexpr float kLn2Lo = -2.12194440e-4f;       ///< ln 2 − kLn2Hi
constexpr float kRound = 12582912.0f;           ///< 1.5 · 2^23: adding it rounds to an integer
constexpr float kLowest = -87.0f;               ///< below it, e^x is 0 here
/// e^r's polynomial (the classic Cephes coefficients), highest degree first
constexpr float kPoly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                            4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
}  // namespace fast_exp

/// e^x for x ≤ 0 in float32, within 2 ulp of the correctly rounded value for x ≥ −87 (tested over
/// that whole range in tests/test_softmax.cpp); 0 below −87, where e^x < 1.7e−38 is subnormal or
/// zero; exactly 0 at −inf and exactly 1 at 0; NaN stays NaN. `fused` rounds each multiply-add once
/// (std::fma): a third fewer instructions in kernels compiled for AVX2 or AVX-512, other bits; in
/// code compiled for the x86-64 baseline each fma is a call into libm, so only those kernels use it.
///
/// Range reduction x = n·ln 2 + r with |r| ≤ ln 2 / 2 (ln 2 split into a part exact in float and a
/// correction), e^r from its degree-6 Taylor-like minimax polynomial (the classic Cephes
/// coefficients), and 2^n built in the exponent bits. No branches and no calls.
template <bool fused>
[[gnu::always_inline]] inline float exp_nonpositive_as(float x) {
  using namespace fast_exp;
  // n = round(x / ln 2), from a copy of x kept in [kLowest, 0] so that every conversion is defined
  // (a NaN x compares false and takes kLowest; the NaN still flows through r).
  const float clamped = x >= kLowest ? (x <= 0.0f ? x : 0.0f) : kLowest;
  const float n = multiply_add<fused>(clamped, kLog2e, kRound) - kRound;
  const float r = multiply_add<fused>(-n, kLn2Lo, multiply_add<fused>(-n, kLn2Hi, x));
  // Horner's rule written out: as a loop over kPoly, GCC vectorised no loop that called this one.
  float p = multiply_add<fused>(kPoly[0], r, kPoly[1]);
  p = multiply_add<fused>(p, r, kPoly[2]);
  p = multiply_add<fused>(p, r, kPoly[3]);
  p = multiply_add<fused>(p, r, kPoly[4]);
  p = multiply_add<fused>(p, r, kPoly[5]);
  const float er = multiply_add<fused>(p, r * r, r) + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;  // 2^n, n in [−126, 0]
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return x < kLowest ? 0.0f : er * scale;
}

/// exp_nonpositive_as without fused multiply-adds: the same bits in code compiled for any CPU.
inline float exp_nonpositive(float x) { return exp_nonpositive_as<false>(x); }

/// e^x for x ≤ 0 in a kernel templated on its dtype: exp_nonpositive_as<fused> in float32, libm's in
/// float64.
template <class T, bool fused = false>
[[gnu::always_inline]] inline T exp_nonpositive_of(T x) {
  if constexpr (std::is_same_v<T, float>)
    return exp_nonpositive_as<fused>(x);
  else
    return std::exp(x);
}

/// ln x for x in [1, 4), in float32, in a form the compiler vectorises (for sums of up to three
/// exponentials of x ≤ 0, the CTC recursions' log-sum-exps, ops/ctc.cpp); a NaN x gives NaN. Within 1
/// ulp of the correctly rounded value over the whole range (tests/test_ctc.cpp checks every float
/// there, and reports the worst). `fused` as for exp_nonpositive_as.
///
/// x = 2^e · f with f in [√2/2, √2), e in {0, 1, 2}; ln f = 2 atanh w, w = (f − 1) / (f + 1), |w| ≤
/// 0.172, from its series to w⁹ (the next term is below 2^−28 of the sum), arranged so that the
/// rounding of w reaches only a correction term; ln 2 in two parts.
template <bool fused>
[[gnu::always_inline]] inline float log_1_to_4_as(float x) {
  using namespace fast_exp;
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const uint32_t mantissa = (bits & 0x7FFFFFu) | 0x3F800000u;  // f in [1, 2), e = bits' exponent − 127
  float f;
  std::memcpy(&f, &mantissa, sizeof f);
  const bool halve = f > 1.41421356f;
  const float e = static_cast<float>(static_cast<int32_t>(bits >> 23) - 127 + (halve ? 1 : 0));
  f = halve ? f * 0.5f : f;  // exact
  const float u = f - 1.0f;  // exact: f lies within a factor 2 of 1
  const float w = u / (f + 1.0f), w2 = w * w;
  const float p = multiply_add<fused>(multiply_add<fused>(multiply_add<fused>(1.0f / 9, w2, 1.0f / 7), w2, 1.0f / 5),
                                     w2, 1.0f / 3);
  // 2 atanh w = 2w + 2w³ p, and 2w = u − u w: ln f = u − w (u − 2 w² p), whose leading term u is exact.
  const float ln_f = multiply_add<fused>(-w, multiply_add<fused>(-2.0f * w2, p, u), u);
  const float ln_x = multiply_add<fused>(e, kLn2Hi, multiply_add<fused>(e, kLn2Lo, ln_f));
  return x == x ? ln_x : x;
}

#if TP_CPU_DISPATCH
/// exp_nonpositive_as<true> on 16 lanes of AVX-512, operation for operation: the same bits in every
/// lane (tests/test_softmax.cpp checks it over the float32 range, NaN and ±inf included). For kernels
/// that keep a row in registers (fused attention's softmax, ops/attention.cpp) where the loop form
/// above would leave the row's last lanes to a scalar loop.
TP_TARGET_AVX512 inline __m512 exp_nonpositive_avx512(__m512 x) {
  using namespace fast_exp;
  const __m512 lowest = _mm512_set1_ps(kLowest), zero = _mm512_setzero_ps(), round = _mm512_set1_ps(kRound);
  // clamped = x ≥ kLowest ? (x ≤ 0 ? x : 0) : kLowest, a NaN taking kLowest (its comparisons are false)
  const __m512 below_zero = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, zero, _CMP_LE_OQ), zero, x);
  const __m512 clamped = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lowest, _CMP_GE_OQ), lowest, below_zero);
  const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(clamped, _mm512_set1_ps(kLog2e), round), round);
  // r = fma(−n, kLn2Lo, fma(−n, kLn2Hi, x)): fnmadd's −(a · b) + c is that, rounded once
  const __m512 r =
      _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x));
  __m512 p = _mm512_set1_ps(kPoly[0]);
  for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kPoly[i]));
  const __m512 er = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  // (the maskz forms: GCC 12 warns that the plain ones' undefined pass-through may be uninitialised)
  const __m512i bits = _mm512_maskz_slli_epi32(
      0xFFFF, _mm512_add_epi32(_mm512_maskz_cvttps_epi32(0xFFFF, n), _mm512_set1_epi32(127)), 23);
  // x < kLowest ? 0 : er · 2^n, a NaN x keeping its NaN (x < kLowest is false for it)
  return _mm512_maskz_mul_ps(_mm512_cmp_ps_mask(x, lowest, _CMP_NLT_UQ), er, _mm512_castsi512_ps(bits));
}

/// log_1_to_4_as<true> on 16 lanes of AVX-512, operation for operation: the same bits in every lane
/// (tests/test_ctc.cpp checks every float in [1, 4) and NaN), for the CTC rows (ops/ctc.cpp).
TP_TARGET_AVX512 inline __m512 log_1_to_4_avx512(__m512 x) {
  using namespace fast_exp;
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512i bits = _mm512_castps_si512(x);
  // f in [1, 2) from the mantissa; e = bits' exponent − 127, one more where f is halved
  __m512 f = _mm512_castsi512_ps(
      _mm512_or_si512(_mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFF)), _mm512_set1_epi32(0x3F800000)));
  const __mmask16 halve = _mm512_cmp_ps_mask(f, _mm512_set1_ps(1.41421356f), _CMP_GT_OQ);
  const __m512i exponent = _mm512_sub_epi32(_mm512_maskz_srli_epi32(0xFFFF, bits, 23), _mm512_set1_epi32(127));
  const __m512i raised = _mm512_mask_add_epi32(exponent, halve, exponent, _mm512_set1_epi32(1));
  const __m512 e = _mm512_maskz_cvtepi32_ps(0xFFFF, raised);
  f = _mm512_mask_mul_ps(f, halve, f, _mm512_set1_ps(0.5f));
  const __m512 u = _mm512_sub_ps(f, one);
  const __m512 w = _mm512_div_ps(u, _mm512_add_ps(f, one)), w2 = _mm512_mul_ps(w, w);
  const __m512 p = _mm512_fmadd_ps(
      _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(1.0f / 9), w2, _mm512_set1_ps(1.0f / 7)), w2,
                      _mm512_set1_ps(1.0f / 5)),
      w2, _mm512_set1_ps(1.0f / 3));
  // fma(−w, a, u) is fnmadd's −(w · a) + u, rounded once
  const __m512 ln_f = _mm512_fnmadd_ps(w, _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(-2.0f), w2), p, u), u);
  const __m512 ln_x =
      _mm512_fmadd_ps(e, _mm512_set1_ps(kLn2Hi), _mm512_fmadd_ps(e, _mm512_set1_ps(kLn2Lo), ln_f));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_ORD_Q), x, ln_x);  // a NaN x stays
}

/// y[i] = log_1_to_4_avx512 of x[i] for i < n, 16 at a time: for code compiled for the baseline
/// (its tests).
TP_TARGET_AVX512 inline void log_1_to_4_avx512(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = static_cast<__mmask16>(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, lanes, log_1_to_4_avx512(_mm512_maskz_loadu_ps(lanes, x + i)));
  }
}

/// y[i] = exp_nonpositive_avx512 of x[i] for i < n, 16 at a time: the vector form's entry for code
/// compiled for the baseline (its tests).
TP_TARGET_AVX512 inline void exp_nonpositive_avx512(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = static_cast<__mmask16>(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, lanes, exp_nonpositive_avx512(_mm512_maskz_loadu_ps(lanes, x + i)));
  }
}
#endif

}  // namespace tapestry
