/// @file
/// bfloat16: the top 16 bits of an IEEE float32 (sign, 8 exponent bits, 7 mantissa bits), so it has
/// float32's range with 8 significant bits. Tensors store it; kernels compute in float32
/// (compute_t<bfloat16> is float) and round each result back.
///
/// Rounding from float32 is to nearest, ties to even, as the hardware's conversion does
/// (__float2bfloat16_rn): 1 + 2^-8 rounds to 1, 1 + 3·2^-8 to 1 + 2^-6. Values beyond the largest
/// finite bfloat16 round to ±infinity; a NaN stays a (quiet) NaN with its sign. Every bfloat16 is a
/// float32 exactly, so the conversion back loses nothing. A float64 or an integer converts through
/// float32 (two roundings, as PyTorch's conversion does).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/macros.h"

namespace tapestry {

/// A bfloat16 value: its 16 bits, converted from and to float32 as above.
struct bfloat16 {
  uint16_t bits = 0;  ///< sign, exponent, mantissa: the float32's top half

  bfloat16() = default;
  /// `value` rounded to nearest, ties to even.
  TP_HOST_DEVICE explicit bfloat16(float value) : bits(round(value)) {}
  /// `value` through float32 (two roundings).
  TP_HOST_DEVICE explicit bfloat16(double value) : bfloat16(static_cast<float>(value)) {}
  /// `value` through float32.
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  TP_HOST_DEVICE explicit bfloat16(I value) : bfloat16(static_cast<float>(value)) {}

  /// The float32 with the same value (exact).
  TP_HOST_DEVICE operator float() const { return bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

  /// The bfloat16 whose bits are `bits`.
  TP_HOST_DEVICE static bfloat16 from_bits(uint16_t bits) {
    bfloat16 b;
    b.bits = bits;
    return b;
  }

 private:
  // The bits of `from` read as a To (std::bit_cast, C++20; memcpy is a builtin on both devices).
  template <class To, class From>
  TP_HOST_DEVICE static To bit_cast(From from) {
    static_assert(sizeof(To) == sizeof(From), "same size");
    To to;
    std::memcpy(&to, &from, sizeof to);
    return to;
  }
  TP_HOST_DEVICE static uint16_t round(float value) {
    uint32_t word = bit_cast<uint32_t>(value);
    if ((word & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((word >> 16) | 0x0040u);  // NaN, kept quiet
    // Adding 0x7fff plus the lowest kept bit carries into the kept bits exactly when the dropped
    // half is above one half, or equal to it with an odd kept part (ties to even). A carry out of
    // the mantissa raises the exponent, up to infinity, which is the right rounding there too.
    word += 0x7fffu + ((word >> 16) & 1u);
    return static_cast<uint16_t>(word >> 16);
  }
};

static_assert(sizeof(bfloat16) == 2, "bfloat16 is stored in two bytes");

/// The type a kernel computes in for elements of type T: T itself, float for bfloat16.
template <class T> struct compute_type {
  using type = T;  ///< T
};
/// bfloat16 computes in float32.
template <> struct compute_type<bfloat16> {
  using type = float;  ///< float32
};
/// compute_type<T>::type.
template <class T> using compute_t = typename compute_type<T>::type;

}  // namespace tapestry
