/// @file
/// e^x for the x ≤ 0 of a softmax row (x − max), in a form the compiler vectorises: libm's expf is
/// a call per element, which kept softmax loops scalar and made them a sixth of a full-attention
/// layer's time on the CPU.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

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
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;      // ln 2 to 10 bits: n · kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;   // ln 2 − kLn2Hi
  constexpr float kRound = 12582912.0f;       // 1.5 · 2^23: adding it rounds to an integer
  constexpr float kLowest = -87.0f;
  // n = round(x / ln 2), from a copy of x kept in [kLowest, 0] so that every conversion is defined
  // (a NaN x compares false and takes kLowest; the NaN still flows through r).
  const float clamped = x >= kLowest ? (x <= 0.0f ? x : 0.0f) : kLowest;
  const float n = multiply_add<fused>(clamped, kLog2e, kRound) - kRound;
  const float r = multiply_add<fused>(-n, kLn2Lo, multiply_add<fused>(-n, kLn2Hi, x));
  float p = 1.9875691500e-4f;
  p = multiply_add<fused>(p, r, 1.3981999507e-3f);
  p = multiply_add<fused>(p, r, 8.3334519073e-3f);
  p = multiply_add<fused>(p, r, 4.1665795894e-2f);
  p = multiply_add<fused>(p, r, 1.6666665459e-1f);
  p = multiply_add<fused>(p, r, 5.0000001201e-1f);
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

}  // namespace tapestry
