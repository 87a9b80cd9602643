/// @file
/// Creation ops: tensors whose values are computed on their device (a fill, a range, random draws).
/// empty and from_vector, which only allocate or copy, are in core/creation.h.
#pragma once

#include "core/creation.h"
#include "core/random.h"
#include "core/tensor.h"

namespace tapestry {

///@{
/// A tensor of `shape` (dtype and device from `options`) filled with 0, 1 or `value` (full refuses
/// a value outside an integer dtype's range).
Tensor zeros(const Shape& shape, Options options = {});
Tensor ones(const Shape& shape, Options options = {});
Tensor full(const Shape& shape, double value, Options options = {});
///@}
///@{
/// The same with the shape, dtype and device of `like`.
Tensor zeros_like(const Tensor& like);
Tensor ones_like(const Tensor& like);
Tensor full_like(const Tensor& like, double value);
///@}

///@{
/// [start, end) in steps of `step` (which must be non-zero); arange(n) is 0, 1, ..., n - 1. Element i
/// is start + i · step computed in double and converted, on either device. Any dtype but bool: an
/// int32 / int64 range needs a whole start and step and elements within int32 (int64: within ±2^53,
/// where doubles are exact); others are refused.
Tensor arange(double start, double end, double step = 1.0, Options options = {DType::Int64});
inline Tensor arange(int64_t end, Options options = {DType::Int64}) { return arange(0.0, double(end), 1.0, options); }
///@}

/// A 0-d tensor holding `value`.
Tensor scalar(double value, Options options = {});

///@{
/// Random tensors from an explicit generator (core/random.h): rand uniform [0, 1), randn standard
/// normal, randint uniform in [low, high). In bfloat16, the float32 draws rounded (rand's draws that
/// round to 1 become the largest bfloat16 below 1, 1 − 2^-8), from the same counters.
Tensor rand(const Shape& shape, Generator& gen, Options options = {});
Tensor randn(const Shape& shape, Generator& gen, Options options = {});
Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator& gen,
               Options options = {DType::Int64});
///@}

}  // namespace tapestry
