// CUDA launcher of batched_gemm (ops/cuda/matmul.cu, cuBLAS). Plain C++: ops/matmul.cpp works out
// how BLAS sees each operand (row-major with a leading dimension, transposed or not) for both
// backends and hands the result over.
#pragma once

#include "core/tensor.h"
#include "ops/matmul.h"

namespace tapestry::cuda {

// For every index i of `batch`: out[i] = op(a[i]) · op(b[i]) + beta · out[i], in batch order, where
// each operand's matrix i starts at its first element plus Σ index_d · batch stride_d, and op
// transposes when asked. The flags and leading dims describe a row-major BLAS call (as cblas_?gemm
// with CblasRowMajor takes them): out is m × n with row stride ldc, op(a) m × k, op(b) k × n.
struct GemmBatch {
  Shape batch;
  Tensor a, b, out;  // a and b: float32 / float64 / bfloat16 on out's device, out's dtype
  Transpose trans_a = Transpose::No, trans_b = Transpose::No;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 1, ldb = 1, ldc = 1;
  Strides batch_a, batch_b, batch_c;  // per batch dim, in elements; 0 where an operand broadcasts
  double beta = 0.0;
};

void batched_gemm(const GemmBatch& g);

}  // namespace tapestry::cuda
