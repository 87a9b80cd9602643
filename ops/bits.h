/// @file
/// Packed sign bits and Hamming distances: the hashing side of clustered attention (DESIGN §5).
/// Each query is hashed with R ≤ 64 sign random projections into one int64 code; Lloyd iterations
/// of k-means then compare codes by Hamming distance (popcount of the XOR). No gradient flows
/// through either op (their outputs are integers).
#pragma once

#include "core/tensor.h"

namespace tapestry {

/// x (..., R) floating, R ≤ 64 -> codes (...) int64. Bit r (the value 1 << r) of a code is set when
/// x[..., r] > 0; zero, negative and NaN entries leave it clear. Bits R..63 are 0, except that
/// with R = 64 bit 63 is the sign bit of the int64, so such codes may be negative. R = 0 gives 0.
Tensor pack_sign_bits(const Tensor& x);

/// popcount(a XOR b) elementwise for int64 codes a and b (numpy broadcasting), as int64 in [0, 64].
Tensor hamming_distance(const Tensor& a, const Tensor& b);

}  // namespace tapestry
