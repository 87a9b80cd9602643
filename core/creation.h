/// @file
/// Creating tensors from memory: uninitialised storage, or values the host already has. The
/// creation functions that compute values on the tensor's device (zeros, full, arange, rand, ...)
/// are ops, in ops/creation.h.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace tapestry {

Tensor empty(const Shape& shape, Options options = {});  ///< uninitialised
/// empty() with the shape, dtype and device of `like`.
Tensor empty_like(const Tensor& like);

/// Copies `values` into a new tensor of `shape` (numel must match); the dtype is T's.
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device = Device::cpu());

}  // namespace tapestry
