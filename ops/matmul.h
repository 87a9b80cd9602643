/// @file
/// Matrix products through BLAS (OpenBLAS cblas_?gemm on the CPU).
#pragma once

#include "core/tensor.h"

namespace tapestry {

/// (..., n, k) @ (..., k, m) -> (..., n, m); batch dims broadcast. A 1-d operand is a row (left) or
/// column (right) vector, removed from the result, as in numpy. float32 / float64 / bfloat16 (float32
/// accumulation); under autocast (ops/autocast.h) float32 operands compute in bfloat16.
Tensor matmul(const Tensor& a, const Tensor& b);

/// y = x · weightᵀ + bias over the last dim of x: (..., in) with weight (out, in) and bias (out) or
/// undefined gives (..., out). One GEMM for all leading dims, the bias added to its output where it
/// lies (batched_gemm's `bias`). Its backward computes d weight = dyᵀ · x directly in the
/// weight's layout and d bias as column sums of dy, so no transposed copy is ever made. Dtypes as
/// matmul's, autocast included.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

/// ‖x_j W‖² for each row x_j of x (..., in), W (in, out): (...). The same function as
/// sum(matmul(x, w) ⊙ matmul(x, w), over the last dim), but x W, a tensor as large as x, is not kept
/// for the backward: it is formed again there (one more product), where ∂/∂(x W) = 2 x W. For a
/// caller that keeps x anyway (neural clustering's cosine loss, nn/attention/neural_clustering.cpp).
/// Differentiable in x and w; float32, float64 or bfloat16, computed in x's dtype whether autocast
/// is on or not (ops/autocast.h: a norm is among what wants float32's precision).
Tensor squared_row_norms_of_product(const Tensor& x, const Tensor& w);

/// Whether batched_gemm uses an operand as it is (No) or its transpose (Yes): op below.
enum class Transpose { No, Yes };

/// For every index i of `batch`: out[i] = op(a[i]) · op(b[i]) + beta · out[i], where op transposes
/// when asked and each operand's batch dims broadcast to `batch`. Batches run in order, so an `out`
/// that broadcasts (one matrix for several i) accumulates the products when beta = 1: that is how
/// matmul's backward sums over broadcast batch dims. beta = 0 overwrites `out` without reading it, as
/// in BLAS, so `out` may be uninitialised. Transposed or column-major operands are passed
/// to BLAS with transpose flags, not copied.
///
/// With `bias` (a vector of out's last dim; no batch, beta = 0): out = op(a) · op(b) + bias over every
/// row. On the CPU each thread adds the bias to its own part of `out` right after its product, while
/// those rows are in its cache (a pass of its own over a fresh `out`, before the product, cost as much
/// as a narrow product: docs/PERFORMANCE.md); elsewhere `out` starts as the bias and BLAS adds the
/// product to it (beta = 1). The two round alike where BLAS sums the product in one block of k.
void batched_gemm(const Shape& batch, const Tensor& a, Transpose ta, const Tensor& b, Transpose tb,
                  const Tensor& out, double beta, const Tensor& bias = Tensor());

}  // namespace tapestry
