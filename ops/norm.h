/// @file
/// Layer normalisation (Ba et al., 2016), fused: one pass per row forward, one backward.
#pragma once

#include "core/tensor.h"

namespace tapestry {

/// y = (x − μ) / √(σ² + eps) ⊙ weight + bias, where μ and σ² (the biased variance, divided by D) are
/// taken over the trailing dims `normalized_shape` of x (D = its number of elements), as in PyTorch.
/// weight and bias are optional (undefined = 1 and 0); when given they have shape normalized_shape
/// and x's dtype. x is floating; eps ≥ 0.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
/// The same over the last dim only: normalized_shape = (x.size(-1),).
Tensor layer_norm(const Tensor& x, const Tensor& weight = {}, const Tensor& bias = {}, double eps = 1e-5);

}  // namespace tapestry
