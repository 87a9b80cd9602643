/// @file
/// Matrix products on raw buffers on the CPU, for the ops that work on buffers rather than tensors:
/// matmul's batches (ops/matmul.cpp), running the library on one thread inside its own OpenMP
/// threads. float32 takes oneDNN's GEMM where the build has it (ops/onednn_gemm.h: its JIT kernels
/// run the narrow products of small models 1.1–2.6× faster than OpenBLAS's, and 2048³ alike:
/// docs/PERFORMANCE.md), else OpenBLAS's cblas_sgemm; float64 takes OpenBLAS's cblas_dgemm. (Fused
/// attention's tile products: ops/tile_gemm.h. bfloat16 products: ops/onednn_gemm.h.)
#pragma once

#include <cblas.h>

#include <cstdint>
#include <type_traits>

#include "ops/onednn_gemm.h"

namespace tapestry {

/// c (m × n, row stride ldc) = alpha · op(a) · op(b) + beta · c, row-major, where op transposes its
/// operand when asked (a is m × k after op, b is k × n after op; lda and ldb are their stored row
/// strides). beta = 0 overwrites c without reading it, as in BLAS. float32 (the library of
/// cpu_float32_gemm()) or float64 (OpenBLAS).
template <class T>
void cpu_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
              const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "BLAS takes float32 or float64");
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    if (cpu_float32_gemm() == Float32Gemm::OneDnn)
      onednn_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
      cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

/// OpenBLAS on one thread while it lives (the previous count restored after). Tapestry's CPU kernels
/// that call BLAS split the work among OpenMP's threads themselves and run BLAS on one thread in
/// each: OpenBLAS's own threads beside OpenMP's would contend for the cores (OpenMP's idle workers
/// spin for a while after each parallel region), which made fused attention (then on BLAS) about 4×
/// and the copy-task model's training step 2.5× slower (docs/PERFORMANCE.md). Not for concurrent use from
/// several threads of the caller's own: the count is global to OpenBLAS.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas() : threads_(openblas_get_num_threads()) { openblas_set_num_threads(1); }
  ~SingleThreadedBlas() { openblas_set_num_threads(threads_); }
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int threads_;
};

}  // namespace tapestry
