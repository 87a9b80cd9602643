/// @file
/// Layer normalisation (Ba et al., 2016), fused: one pass per row forward, one backward.
#pragma once

#include "core/tensor.h"
#include "ops/dropout.h"

namespace tapestry {

/// y = (x − μ) / √(σ² + eps) ⊙ weight + bias, where μ and σ² (the biased variance, divided by D) are
/// taken over the trailing dims `normalized_shape` of x (D = its number of elements), as in PyTorch.
/// weight and bias are optional (undefined = 1 and 0); when given they have shape normalized_shape
/// and x's dtype. x is floating; eps ≥ 0.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
/// The same over the last dim only: normalized_shape = (x.size(-1),).
Tensor layer_norm(const Tensor& x, const Tensor& weight = {}, const Tensor& bias = {}, double eps = 1e-5);

/// layer_norm(x + dropout(s, p, gen, mode), weight, bias, eps) over the last dim: a post-norm
/// Transformer's residual step (nn/transformer.h), x the layer's input and s its sublayer's output.
/// On the CPU in float32 and float64, one pass over each chunk of rows: dropout's mask, the sum and
/// the normalisation while the rows are in cache, and in the backward layer_norm's gradient then the
/// mask's; the three ops' draws, values and gradients to the bit, and `gen` left as they leave it. On
/// a GPU, in bfloat16 and under autocast, the three ops. x and s of one shape and dtype; 0 ≤ p < 1.
Tensor dropout_add_layer_norm(const Tensor& x, const Tensor& s, double p, Generator& gen, Mode mode,
                              const Tensor& weight = {}, const Tensor& bias = {}, double eps = 1e-5);

}  // namespace tapestry
