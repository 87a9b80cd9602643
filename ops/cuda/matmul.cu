// batched_gemm on the GPU through cuBLAS (cublasGemmStridedBatchedEx_64), on the context's stream;
// float32, float64, and bfloat16 with float32 accumulation.
//
// Row-major ↔ column-major. cuBLAS reads matrices column-major; Tapestry stores them row-major. A
// row-major r × c matrix with row stride ld is, byte for byte, the column-major c × r matrix (its
// transpose) with leading dimension ld. So the row-major product C = op(A) · op(B) (m × n) is computed
// as the column-major product Cᵀ = op(B)ᵀ · op(A)ᵀ (n × m): swap the operands, swap m and n, and keep
// each operand's transpose flag, since a row-major operand seen column-major is already transposed.
// Transposed or column-major views therefore cost a flag, never a copy (ops/matmul.cpp sets the flags).
//
// Batches. The batch dims are merged where all three operands allow (make_indexer); the innermost
// remaining batch dim is one strided-batched call, the outer ones a loop of calls queued in order.
// When the output broadcasts along the innermost dim (stride 0: matmul's backward summing over
// broadcast batch dims with beta = 1), the products must accumulate one after another, which a
// batched call does not promise, so each matrix is a call of its own.
#include <cublas_v2.h>

#include "core/dispatch.h"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/matmul.h"
#include "ops/cuda/strided.h"

namespace tapestry::cuda {

namespace {

// out[i] = beta · out[i] for every batch index i, in order: the empty sum of k = 0. beta = 0
// overwrites without reading (out may be uninitialised), as in BLAS.
void scale_outputs(const GemmBatch& g, const StridedIndexer<3>& ix, int64_t count) {
  if (g.beta == 1.0) return;
  for (int64_t i = 0; i < count; ++i) {
    int64_t offset[3];
    ix.offsets(i, offset);
    const Tensor matrix = make_view(g.out, {g.m, g.n}, {g.ldc, 1}, g.out.offset() + offset[2]);
    if (g.beta == 0.0) cuda::fill_(matrix, 0.0);
    else cuda::mul_(matrix, g.beta);
  }
}

cublasOperation_t op_of(Transpose t) { return t == Transpose::Yes ? CUBLAS_OP_T : CUBLAS_OP_N; }

}  // namespace

void batched_gemm(const GemmBatch& g) {
  const int64_t count = numel(g.batch);
  if (count == 0 || g.m == 0 || g.n == 0) return;
  const StridedIndexer<3> ix = make_indexer<3>("matmul", g.batch, {g.batch_a, g.batch_b, g.batch_c});
  if (g.k == 0) {
    scale_outputs(g, ix, count);
    return;
  }
  CudaContext& ctx = active_context(g.out.device());
  cublasHandle_t handle = ctx.cublas();
  const std::lock_guard<std::mutex> lock(ctx.cublas_mutex());

  // The innermost merged batch dim goes into one call, unless the output broadcasts along it.
  int64_t inner = 1, stride_a = 0, stride_b = 0, stride_c = 0;
  if (ix.ndim > 0 && ix.strides[ix.ndim - 1][2] != 0) {
    inner = ix.sizes[ix.ndim - 1];
    stride_a = ix.strides[ix.ndim - 1][0];
    stride_b = ix.strides[ix.ndim - 1][1];
    stride_c = ix.strides[ix.ndim - 1][2];
  }

  visit_floating_or_bfloat16(g.out.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    // bfloat16 operands and output, products accumulated in float32 (alpha and beta float32 too).
    constexpr bool dbl = std::is_same_v<T, double>, half = std::is_same_v<T, bfloat16>;
    using Scalar = std::conditional_t<dbl, double, float>;
    const cudaDataType type = dbl ? CUDA_R_64F : half ? CUDA_R_16BF : CUDA_R_32F;
    const cublasComputeType_t compute =
        dbl ? CUBLAS_COMPUTE_64F
            : !half && ctx.float32_matmul() == Float32Matmul::TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const Scalar alpha = 1, beta = static_cast<Scalar>(g.beta);
    const T* a = static_cast<const T*>(g.a.raw_data());
    const T* b = static_cast<const T*>(g.b.raw_data());
    T* c = static_cast<T*>(g.out.raw_data());
    for (int64_t first = 0; first < count; first += inner) {
      int64_t offset[3];
      ix.offsets(first, offset);
      // Cᵀ (n × m) = op(B)ᵀ (n × k) · op(A)ᵀ (k × m), column-major: see the top of the file.
      TP_CUBLAS_CHECK(cublasGemmStridedBatchedEx_64(
          handle, op_of(g.trans_b), op_of(g.trans_a), g.n, g.m, g.k, &alpha, b + offset[1], type, g.ldb,
          stride_b, a + offset[0], type, g.lda, stride_a, &beta, c + offset[2], type, g.ldc, stride_c,
          inner, compute, CUBLAS_GEMM_DEFAULT));
    }
  });
}

}  // namespace tapestry::cuda
