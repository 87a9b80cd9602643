/// @file
/// Elementwise ops with numpy broadcasting. Binary ops need one dtype on both sides (no implicit
/// promotion); a double operand becomes a 0-d tensor of the other side's dtype (for an integer
/// tensor it must be finite and in the dtype's range: full() refuses it otherwise).
///
/// Integer overflow wraps. add, sub, mul, neg and abs on int64 / int32 compute modulo 2^64 / 2^32
/// and read the result as two's complement, on both devices: add(max, 1) = min, neg(min) = min,
/// abs(min) = min, mul(2^62, 4) = 0. div(min, −1) wraps to min the same way; an integer division
/// by zero is refused.
#pragma once

#include "core/tensor.h"

namespace tapestry {

///@{
/// a + b, a − b, a · b and a / b elementwise (numeric dtypes; integers wrap and an integer zero
/// divisor is refused, as above). Differentiable in both operands.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
///@}
Tensor pow(const Tensor& a, const Tensor& b);  ///< floating
Tensor pow(const Tensor& x, double exponent);   ///< floating

///@{
/// add, sub, mul and div (a double side becomes a 0-d tensor of the other side's dtype, as above);
/// unary minus is neg.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator-(const Tensor& x);
///@}

///@{
/// Unary, floating tensors only (neg and abs take any numeric tensor, but differentiate floats).
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x);  ///< exact (erf) form
/// Floating x clamped to [lo, hi], scalar bounds with lo ≤ hi (a NaN stays NaN); dx = dy where
/// lo ≤ x ≤ hi, 0 elsewhere.
Tensor clamp(const Tensor& x, double lo, double hi);
/// Bounds as tensors (x's dtype, broadcasting with x): min(max(x, lo), hi), so a NaN in x or in a
/// bound is the result, and where lo > hi the result is hi (as in PyTorch). Differentiable in all
/// three: dx = dy where lo ≤ x ≤ hi, dlo = dy where x < lo < hi, dhi = dy where x > hi or hi < lo.
Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi);
Tensor log1p(const Tensor& x);  ///< log(1 + x), accurate for small |x|
Tensor expm1(const Tensor& x);  ///< e^x − 1, accurate for small |x|
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
///@}

///@{
/// Activations (floating). NaN passes through each.
Tensor silu(const Tensor& x);  ///< x σ(x), also called swish
/// x for x > 0, negative_slope · x otherwise (the gradient at 0 is negative_slope, as relu's is 0).
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
/// log(1 + e^(βx)) / β, smooth relu; x itself where βx > threshold (PyTorch's defaults and rule).
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
///@}

///@{
/// Elementwise maximum / minimum of two tensors (one dtype, broadcasting; integers too). A NaN on
/// either side gives NaN (docs/PORTING.md, "NaN"). The gradient goes to the side the result came
/// from, half to each where a = b.
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
///@}

///@{
/// Comparisons: bool results, no gradient.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
///@}

///@{
/// Logic on bool tensors (broadcasting).
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);
///@}

/// cond ? a : b elementwise; cond is bool; all three broadcast together.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// x with `value` where mask (bool, broadcast to x) is true.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

///@{
/// In place: not recorded on the tape. They refuse a tensor that requires grad while grad mode is
/// on, and bump the storage version (so backward refuses data saved before the change).
/// add_: self += other (other broadcasts to self). mul_: self *= factor. fill_: every element of
/// self = value. copy_: self = src (src broadcasts to self; any devices).
void add_(const Tensor& self, const Tensor& other);
void mul_(const Tensor& self, double factor);
void fill_(const Tensor& self, double value);
void copy_(const Tensor& self, const Tensor& src);
///@}

}  // namespace tapestry
