// Creating tensors.
#pragma once

#include <vector>

#include "core/random.h"
#include "core/tensor.h"

namespace tapestry {

Tensor empty(const Shape& shape, Options options = {});  // uninitialised
Tensor zeros(const Shape& shape, Options options = {});
Tensor ones(const Shape& shape, Options options = {});
Tensor full(const Shape& shape, double value, Options options = {});
Tensor zeros_like(const Tensor& like);
Tensor ones_like(const Tensor& like);
Tensor full_like(const Tensor& like, double value);
Tensor empty_like(const Tensor& like);

// [start, end) in steps of `step` (which must be non-zero); arange(n) is 0, 1, ..., n - 1.
Tensor arange(double start, double end, double step = 1.0, Options options = {DType::Int64});
inline Tensor arange(int64_t end, Options options = {DType::Int64}) { return arange(0.0, double(end), 1.0, options); }

// Copies `values` into a new tensor of `shape` (numel must match); the dtype is T's.
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device = Device::cpu());
// A 0-d tensor holding `value`.
Tensor scalar(double value, Options options = {});

// Random tensors from an explicit generator (core/random.h).
Tensor rand(const Shape& shape, Generator& gen, Options options = {});   // uniform [0, 1)
Tensor randn(const Shape& shape, Generator& gen, Options options = {});  // standard normal
Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator& gen,
               Options options = {DType::Int64});  // uniform in [low, high)

}  // namespace tapestry
