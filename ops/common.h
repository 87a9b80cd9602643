/// @file
/// Argument checks shared by every op. Each throws Error naming the op.
#pragma once

#include <initializer_list>
#include <vector>

#include "core/autograd.h"
#include "core/creation.h"
#include "ops/creation.h"
#include "core/dispatch.h"
#include "core/tensor.h"

namespace tapestry {

/// Every tensor is defined and all live on one device.
void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors);
/// a and b have one dtype.
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b);
/// x is defined and floating (float32, float64 or bfloat16).
void check_floating(const char* op, const Tensor& x);
/// Ops whose CUDA kernels the build does not have yet refuse GPU tensors with this error, rather
/// than read device memory from the host.
void check_cpu(const char* op, const Tensor& x);

}  // namespace tapestry
