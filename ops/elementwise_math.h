/// @file
/// The math of the elementwise ops, written once for both backends.
///
/// A unary op is a functor with forward(x) and backward(dy, x, y) -> dx; a binary op has forward(a, b),
/// grad_a(dy, a, b, y) and grad_b(dy, a, b, y). The derivative is the comment above each backward.
#pragma once

#include <cmath>
#include <type_traits>

#include "core/macros.h"

namespace tapestry::math {

/// Whether x is NaN; never for integers.
template <class T>
TP_HOST_DEVICE bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) return x != x;
  else return false;
}

/// Signed integer arithmetic wraps as two's complement (ops/elementwise.h): computed in the unsigned
/// type, where overflow is defined, and converted back. Other types compute as they are.
template <class T>
constexpr bool kWraps = std::is_integral_v<T> && std::is_signed_v<T>;

///@{
/// a + b, a − b, a · b and −x, wrapping for signed integers (kWraps).
template <class T> TP_HOST_DEVICE T wrapping_add(T a, T b) {
  if constexpr (kWraps<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <class T> TP_HOST_DEVICE T wrapping_sub(T a, T b) {
  if constexpr (kWraps<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
  } else {
    return a - b;
  }
}

template <class T> TP_HOST_DEVICE T wrapping_mul(T a, T b) {
  if constexpr (kWraps<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

template <class T> TP_HOST_DEVICE T wrapping_neg(T x) {
  if constexpr (kWraps<T>) return wrapping_sub(T(0), x);
  else return -x;
}
///@}

/// What a unary functor's backward reads besides dy: its forward's input x, its output y, or
/// neither (each functor says which in kBackwardReads). unary() in ops/elementwise.cpp saves only
/// that tensor for the tape, so the other is not held until the backward pass: relu's input, for
/// one, the largest activation of a Transformer's feed-forward (docs/PERFORMANCE.md).
enum class BackwardReads { Input, Output, Neither };

/// The functor of neg (ops/elementwise.h).
struct Neg {
  static constexpr BackwardReads kBackwardReads = BackwardReads::Neither;  ///< what backward() reads
  /// y = −x (wrapping for signed integers)
  template <class T> TP_HOST_DEVICE T forward(T x) const { return wrapping_neg(x); }
  /// dx = −dy
  template <class T> TP_HOST_DEVICE T backward(T dy, T, T) const { return -dy; }
};

/// The functor of exp (ops/elementwise.h).
struct Exp {
  static constexpr BackwardReads kBackwardReads = BackwardReads::Output;  ///< what backward() reads
  /// y = e^x
  template <class T> TP_HOST_DEVICE T forward(T x) const { return std::exp(x); }
  /// dx = dy ⊙ y
  template <class T> TP_HOST_DEVICE T backward(T dy, T, T y) const { return dy * y; }
};

/// The functor of log (ops/elementwise.h).
struct Log {
  static constexpr BackwardReads kBackwardReads = BackwardReads::Input;  ///< what backward() reads
  /// y = ln x
  template <class T> TP_HOST_DEVICE T forward(T x) const { return std::log(x); }
  /// dx = dy / x
  template <class T> TP_HOST_DEVICE T backward(T dy, T x, T) const { return dy / x; }
};

/// The functor of sqrt (ops/elementwise.h).
struct Sqrt {
  static constexpr BackwardReads kBackwardReads = BackwardReads::Output;  ///< what backward() reads
  /// y = √x
  template <class T> TP_HOST_DEVICE T forward(T x) const { return std::sqrt(x); }
  /// dx = dy / (2 y)
  template <class T> TP_HOST_DEVICE T backward(T dy, T, T y) const { return dy / (T(2) * y); }
};

/// The functor of rsqrt (ops/elementwise.h).
struct Rsqrt {
  static constexpr BackwardReads kBackwardReads = BackwardReads::Output;  ///< what backward() reads
  /// y = 1 / √x
  template <class T> TP_HOST_DEVICE T forward(T x) const { return T(1) / std::sqrt(x); }
  /// y = x^(−1/2):  dx = −½ dy ⊙ y³
  template <class T> TP_HOST_DEVICE T backward(T dy, T, T y) const { return T(-0.5) * dy * y * y * y; }
};

/// The functor of abs (ops/elementwise.h).
struct Abs {
  static constexpr BackwardReads kBackwardReads = BackwardReads::Input;  ///< what backward() reads
  /// y = |x| (wrapping for signed integers: |min| = min)
  template <class T> TP_HOST_DEVICE T forward(T x) const { return x < T(0) ? wrapping_neg(x) : x; }
  /// dx = dy ⊙ sign(x)   (0 at x = 0)
  template <class T> TP_HOST_DEVICE T backward(T dy, T x, T) const {
    return x > T(0) ? dy : (x < T(0) ? -dy : T(0));
  }
};

/// The functor of tanh (ops/elementwise.h).
struct Tanh {
  static constexpr BackwardReads kBackwardReads = BackwardReads::Output;  ///< what backward() reads
  /// y = tanh x
  template <class T> TP_HOST_DEVICE T forward(T x) const { return std::tanh(x); }
  /// dx = dy ⊙ (1 − y²)
  template <class T> TP_HOST_DEVICE T backward(T dy, T, T y) const { return dy * (T(1) - y * y); }
};

/// The functor of sigmoid (ops/elementwise.h).
struct Sigmoid {
  static constexpr BackwardReads kBackwardReads = BackwardReads::Output;  ///< what backward() reads
  /// 1 / (1 + e^−x), written so that neither branch overflows.
  template <class T> TP_HOST_DEVICE T forward(T x) const {
    if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
    const T e = std::exp(x);
    return e / (T(1) + e);
  }
  /// dx = dy ⊙ y (1 − y)
  template <class T> TP_HOST_DEVICE T backward(T dy, T, T y) const { return dy * y * (T(1) - y); }
};

/// The functor of relu (ops/elementwise.h).
struct Relu {
  static constexpr BackwardReads kBackwardReads = BackwardReads::Output;  ///< what backward() reads
  /// NaN passes through (docs/PORTING.md, "NaN").
  template <class T> TP_HOST_DEVICE T forward(T x) const { return x > T(0) || is_nan(x) ? x : T(0); }
  /// dx = dy ⊙ [y > 0], which is [x > 0] (a NaN x gives a NaN y, and neither is > 0)
  template <class T> TP_HOST_DEVICE T backward(T dy, T, T y) const { return y > T(0) ? dy : T(0); }
};

/// GELU, the exact form: x Φ(x) with Φ the standard normal CDF.
struct Gelu {
  static constexpr BackwardReads kBackwardReads = BackwardReads::Input;  ///< what backward() reads
  /// y = x Φ(x) = ½ x (1 + erf(x / √2))
  template <class T> TP_HOST_DEVICE T forward(T x) const {
    return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
  }
  /// dx = dy ⊙ (Φ(x) + x φ(x)),  φ(x) = e^(−x²/2) / √(2π)
  template <class T> TP_HOST_DEVICE T backward(T dy, T x, T) const {
    const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
    const T pdf = std::exp(T(-0.5) * x * x) * T(0.39894228040143267794);
    return dy * (cdf + x * pdf);
  }
};

/// The functor of log1p (ops/elementwise.h).
struct Log1p {
  static constexpr BackwardReads kBackwardReads = BackwardReads::Input;  ///< what backward() reads
  /// y = ln(1 + x)
  template <class T> TP_HOST_DEVICE T forward(T x) const { return std::log1p(x); }
  /// dx = dy / (1 + x)
  template <class T> TP_HOST_DEVICE T backward(T dy, T x, T) const { return dy / (T(1) + x); }
};

/// The functor of expm1 (ops/elementwise.h).
struct Expm1 {
  static constexpr BackwardReads kBackwardReads = BackwardReads::Output;  ///< what backward() reads
  /// y = e^x − 1
  template <class T> TP_HOST_DEVICE T forward(T x) const { return std::expm1(x); }
  /// dx = dy ⊙ (y + 1)
  template <class T> TP_HOST_DEVICE T backward(T dy, T, T y) const { return dy * (y + T(1)); }
};

/// The functor of sin (ops/elementwise.h).
struct Sin {
  static constexpr BackwardReads kBackwardReads = BackwardReads::Input;  ///< what backward() reads
  /// y = sin x
  template <class T> TP_HOST_DEVICE T forward(T x) const { return std::sin(x); }
  /// dx = dy ⊙ cos x
  template <class T> TP_HOST_DEVICE T backward(T dy, T x, T) const { return dy * std::cos(x); }
};

/// The functor of cos (ops/elementwise.h).
struct Cos {
  static constexpr BackwardReads kBackwardReads = BackwardReads::Input;  ///< what backward() reads
  /// y = cos x
  template <class T> TP_HOST_DEVICE T forward(T x) const { return std::cos(x); }
  /// dx = −dy ⊙ sin x
  template <class T> TP_HOST_DEVICE T backward(T dy, T x, T) const { return -dy * std::sin(x); }
};

/// SiLU (swish): x σ(x).
struct Silu {
  static constexpr BackwardReads kBackwardReads = BackwardReads::Input;  ///< what backward() reads
  /// y = x σ(x)
  template <class T> TP_HOST_DEVICE T forward(T x) const { return x * Sigmoid{}.forward(x); }
  /// dx = dy ⊙ σ(x) (1 + x (1 − σ(x)))
  template <class T> TP_HOST_DEVICE T backward(T dy, T x, T) const {
    const T s = Sigmoid{}.forward(x);
    return dy * s * (T(1) + x * (T(1) - s));
  }
};

/// The functor of leaky_relu (ops/elementwise.h).
struct LeakyRelu {
  static constexpr BackwardReads kBackwardReads = BackwardReads::Input;  ///< what backward() reads
  double slope;  ///< negative_slope: y = slope · x for x ≤ 0
  /// A NaN passes through (slope · NaN is NaN).
  template <class T> TP_HOST_DEVICE T forward(T x) const { return x > T(0) ? x : T(slope) * x; }
  /// dx = dy ⊙ (x > 0 ? 1 : slope)
  template <class T> TP_HOST_DEVICE T backward(T dy, T x, T) const { return x > T(0) ? dy : T(slope) * dy; }
};

/// log(1 + e^(βx)) / β, and x itself where βx > threshold (where the two agree to rounding and the
/// exponential would overflow).
struct Softplus {
  static constexpr BackwardReads kBackwardReads = BackwardReads::Input;  ///< what backward() reads
  ///@{
  /// β and the threshold above
  double beta, threshold;
  ///@}
  /// y = log(1 + e^(βx)) / β, or x where βx > threshold
  template <class T> TP_HOST_DEVICE T forward(T x) const {
    const T bx = T(beta) * x;
    return bx > T(threshold) ? x : std::log1p(std::exp(bx)) / T(beta);
  }
  /// dx = dy ⊙ σ(βx)   (dy where βx > threshold)
  template <class T> TP_HOST_DEVICE T backward(T dy, T x, T) const {
    const T bx = T(beta) * x;
    return bx > T(threshold) ? dy : dy * Sigmoid{}.forward(bx);
  }
};

/// The functor of pow(x, exponent) (ops/elementwise.h).
struct PowScalar {
  static constexpr BackwardReads kBackwardReads = BackwardReads::Input;  ///< what backward() reads
  double exponent;  ///< p
  /// y = x^p
  template <class T> TP_HOST_DEVICE T forward(T x) const { return std::pow(x, T(exponent)); }
  /// dx = dy ⊙ p x^(p−1);  0 for p = 0 (x⁰ is constant; at x = 0 the formula is 0 · ∞ = NaN)
  template <class T> TP_HOST_DEVICE T backward(T dy, T x, T) const {
    return exponent == 0 ? T(0) : dy * T(exponent) * std::pow(x, T(exponent - 1));
  }
};

/// The functor of clamp with scalar bounds (ops/elementwise.h).
struct Clamp {
  static constexpr BackwardReads kBackwardReads = BackwardReads::Input;  ///< what backward() reads
  ///@{
  /// the bounds, lo ≤ hi
  double lo, hi;
  ///@}
  /// y = lo where x < lo, hi where x > hi, else x (a NaN stays NaN)
  template <class T> TP_HOST_DEVICE T forward(T x) const {
    return x < T(lo) ? T(lo) : (x > T(hi) ? T(hi) : x);
  }
  /// dx = dy ⊙ [lo ≤ x ≤ hi]
  template <class T> TP_HOST_DEVICE T backward(T dy, T x, T) const {
    return x >= T(lo) && x <= T(hi) ? dy : T(0);
  }
};

/// The functor of add (ops/elementwise.h).
struct Add {
  /// y = a + b (wrapping for signed integers)
  template <class T> TP_HOST_DEVICE T forward(T a, T b) const { return wrapping_add(a, b); }
  ///@{
  /// da = dy, db = dy
  template <class T> TP_HOST_DEVICE T grad_a(T dy, T, T, T) const { return dy; }
  template <class T> TP_HOST_DEVICE T grad_b(T dy, T, T, T) const { return dy; }
  ///@}
};

/// The functor of sub (ops/elementwise.h).
struct Sub {
  /// y = a − b (wrapping for signed integers)
  template <class T> TP_HOST_DEVICE T forward(T a, T b) const { return wrapping_sub(a, b); }
  ///@{
  /// da = dy, db = −dy
  template <class T> TP_HOST_DEVICE T grad_a(T dy, T, T, T) const { return dy; }
  template <class T> TP_HOST_DEVICE T grad_b(T dy, T, T, T) const { return -dy; }
  ///@}
};

/// The functor of mul (ops/elementwise.h).
struct Mul {
  static constexpr bool kBackwardReadsOutput = false;  ///< whether grad_a or grad_b reads y (binary() saves it then)
  static constexpr bool kGradAReadsA = false;  ///< whether grad_a reads a (else a is kept only for grad_b)
  static constexpr bool kGradBReadsB = false;  ///< whether grad_b reads b (else b is kept only for grad_a)
  /// y = a · b (wrapping for signed integers)
  template <class T> TP_HOST_DEVICE T forward(T a, T b) const { return wrapping_mul(a, b); }
  ///@{
  /// da = dy ⊙ b, db = dy ⊙ a
  template <class T> TP_HOST_DEVICE T grad_a(T dy, T, T b, T) const { return dy * b; }
  template <class T> TP_HOST_DEVICE T grad_b(T dy, T a, T, T) const { return dy * a; }
  ///@}
};

/// The functor of div (ops/elementwise.h).
struct Div {
  static constexpr bool kBackwardReadsOutput = false;  ///< whether grad_a or grad_b reads y (binary() saves it then)
  static constexpr bool kGradAReadsA = false;  ///< whether grad_a reads a (else a is kept only for grad_b)
  static constexpr bool kGradBReadsB = true;  ///< whether grad_b reads b (else b is kept only for grad_a)
  /// y = a / b (min / −1 wraps to min for signed integers)
  template <class T> TP_HOST_DEVICE T forward(T a, T b) const {
    // The one overflowing integer quotient, min / −1, traps like a division by zero; it wraps to
    // min instead (negation in unsigned arithmetic). div() refuses integer zero divisors.
    if constexpr (std::is_integral_v<T>) {
      if (b == T(-1)) return wrapping_neg(a);
    }
    return a / b;
  }
  ///@{
  /// da = dy / b, db = −dy ⊙ a / b²
  template <class T> TP_HOST_DEVICE T grad_a(T dy, T, T b, T) const { return dy / b; }
  template <class T> TP_HOST_DEVICE T grad_b(T dy, T a, T b, T) const { return -dy * a / (b * b); }
  ///@}
};

/// The functor of pow (ops/elementwise.h).
struct Pow {
  static constexpr bool kBackwardReadsOutput = true;  ///< whether grad_a or grad_b reads y (binary() saves it then)
  static constexpr bool kGradAReadsA = true;  ///< whether grad_a reads a (else a is kept only for grad_b)
  static constexpr bool kGradBReadsB = true;  ///< whether grad_b reads b (else b is kept only for grad_a)
  /// y = a^b
  template <class T> TP_HOST_DEVICE T forward(T a, T b) const { return std::pow(a, b); }
  ///@{
  /// da = dy ⊙ b a^(b−1), db = dy ⊙ y ln a;  da = 0 for b = 0 (a⁰ is constant), and db = 0 at
  /// a = 0 for b ≥ 0 (0^b is 0 for b > 0), where the formulas give 0 · ∞ = NaN.
  template <class T> TP_HOST_DEVICE T grad_a(T dy, T a, T b, T) const {
    return b == T(0) ? T(0) : dy * b * std::pow(a, b - T(1));
  }
  template <class T> TP_HOST_DEVICE T grad_b(T dy, T a, T b, T y) const {
    return a == T(0) && b >= T(0) ? T(0) : dy * y * std::log(a);
  }
  ///@}
};

/// Elementwise maximum / minimum: a NaN on either side is the result. The gradient goes to the
/// side the result came from, half to each on a tie (PyTorch's choice).
struct Maximum {
  static constexpr bool kBackwardReadsOutput = false;  ///< whether grad_a or grad_b reads y (binary() saves it then)
  static constexpr bool kGradAReadsA = true;  ///< whether grad_a reads a (else a is kept only for grad_b)
  static constexpr bool kGradBReadsB = true;  ///< whether grad_b reads b (else b is kept only for grad_a)
  /// y = max(a, b); NaN if either is NaN
  template <class T> TP_HOST_DEVICE T forward(T a, T b) const { return a > b || is_nan(a) ? a : b; }
  ///@{
  /// da = dy ⊙ ([a > b] + ½[a = b]), db = dy ⊙ ([b > a] + ½[a = b])   (NaN: to its side)
  template <class T> TP_HOST_DEVICE T grad_a(T dy, T a, T b, T) const {
    return a == b ? dy / T(2) : (a > b || is_nan(a) ? dy : T(0));
  }
  template <class T> TP_HOST_DEVICE T grad_b(T dy, T a, T b, T) const {
    return a == b ? dy / T(2) : (a > b || is_nan(a) ? T(0) : dy);
  }
  ///@}
};

/// The functor of minimum (ops/elementwise.h), the mirror of Maximum: a NaN on either side is the
/// result, and the gradient goes to the side the result came from, half to each on a tie.
struct Minimum {
  static constexpr bool kBackwardReadsOutput = false;  ///< whether grad_a or grad_b reads y (binary() saves it then)
  static constexpr bool kGradAReadsA = true;  ///< whether grad_a reads a (else a is kept only for grad_b)
  static constexpr bool kGradBReadsB = true;  ///< whether grad_b reads b (else b is kept only for grad_a)
  /// y = min(a, b); NaN if either is NaN
  template <class T> TP_HOST_DEVICE T forward(T a, T b) const { return a < b || is_nan(a) ? a : b; }
  ///@{
  /// da = dy ⊙ ([a < b] + ½[a = b]), db = dy ⊙ ([b < a] + ½[a = b])   (NaN: to its side)
  template <class T> TP_HOST_DEVICE T grad_a(T dy, T a, T b, T) const {
    return a == b ? dy / T(2) : (a < b || is_nan(a) ? dy : T(0));
  }
  template <class T> TP_HOST_DEVICE T grad_b(T dy, T a, T b, T) const {
    return a == b ? dy / T(2) : (a < b || is_nan(a) ? T(0) : dy);
  }
  ///@}
};

/// The comparison of eq (ops/elementwise.h).
struct Eq {
  /// `a == b`
  template <class T> TP_HOST_DEVICE bool operator()(T a, T b) const { return a == b; }
};
/// The comparison of ne (ops/elementwise.h).
struct Ne {
  /// `a != b`
  template <class T> TP_HOST_DEVICE bool operator()(T a, T b) const { return a != b; }
};
/// The comparison of lt (ops/elementwise.h).
struct Lt {
  /// `a < b`
  template <class T> TP_HOST_DEVICE bool operator()(T a, T b) const { return a < b; }
};
/// The comparison of le (ops/elementwise.h).
struct Le {
  /// `a <= b`
  template <class T> TP_HOST_DEVICE bool operator()(T a, T b) const { return a <= b; }
};
/// The comparison of gt (ops/elementwise.h).
struct Gt {
  /// `a > b`
  template <class T> TP_HOST_DEVICE bool operator()(T a, T b) const { return a > b; }
};
/// The functor of logical_and (ops/elementwise.h).
struct And {
  /// `a && b`
  TP_HOST_DEVICE bool operator()(bool a, bool b) const { return a && b; }
};
/// The functor of logical_or (ops/elementwise.h).
struct Or {
  /// `a || b`
  TP_HOST_DEVICE bool operator()(bool a, bool b) const { return a || b; }
};
/// The comparison of ge (ops/elementwise.h).
struct Ge {
  /// `a >= b`
  template <class T> TP_HOST_DEVICE bool operator()(T a, T b) const { return a >= b; }
};

}  // namespace tapestry::math
