/// @file
/// A matrix product on raw buffers on the CPU through BLAS (OpenBLAS's cblas_?gemm), for the ops
/// that work on buffers rather than tensors: matmul's batches (ops/matmul.cpp) and fused attention's
/// tiles (ops/attention.cpp).
#pragma once

#include <cblas.h>

#include <cstdint>
#include <type_traits>

namespace tapestry {

/// c (m × n, row stride ldc) = alpha · op(a) · op(b) + beta · c, row-major, where op transposes its
/// operand when asked (a is m × k after op, b is k × n after op; lda and ldb are their stored row
/// strides). beta = 0 overwrites c without reading it, as in BLAS. float32 or float64.
template <class T>
void cpu_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
              const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "BLAS takes float32 or float64");
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace tapestry
