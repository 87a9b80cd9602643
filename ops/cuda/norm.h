// CUDA launchers of layer norm (ops/cuda/norm.cu). Plain C++: ops/norm.cpp calls them for tensors on
// a GPU. Shapes: x, y, dy, dx (R, D), R rows of the D normalized elements, contiguous; weight, bias,
// dweight, dbias (D), contiguous; the per-row statistics mean, rstd (R), float64.
#pragma once

#include "core/tensor.h"

namespace tapestry::cuda {

// μ = Σ x / D, σ² = Σ (x − μ)² / D (two passes, in double), rstd = 1 / √(σ² + eps),
// y = (x − μ) · rstd ⊙ weight + bias; weight and bias may be undefined (1 and 0). Writes y, mean
// and rstd, and where xhat (R, D, bfloat16) is defined x̂ = (x − μ) · rstd in x's dtype, rounded.
void layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, int64_t R,
                        int64_t D, const Tensor& y, const Tensor& xhat, const Tensor& mean, const Tensor& rstd);

// x̂ = (x − μ) · rstd, g = dy ⊙ weight:  dx = rstd · (g − mean_c g − x̂ ⊙ mean_c(g ⊙ x̂)),
// dweight = Σ_rows dy ⊙ x̂,  dbias = Σ_rows dy. Writes (overwrites) each of dx, dweight, dbias that is
// defined; weight may be undefined (1). With mean undefined, x is x̂ itself (in dy's dtype).
void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, int64_t R, int64_t D, const Tensor& dx, const Tensor& dweight,
                         const Tensor& dbias);

}  // namespace tapestry::cuda
