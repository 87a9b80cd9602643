/// @file
/// Matrix products on the CPU through oneDNN: float32 ones through its GEMM (dnnl_sgemm, JIT kernels
/// for this CPU), the library of ops/blas.h's cpu_gemm where the build has oneDNN; bfloat16 ones
/// through its matmul, on the CPU's bfloat16 instructions (AVX-512 BF16, and AMX where the CPU has
/// it), for matmul (ops/matmul.cpp). Only ops/onednn_gemm.cpp sees oneDNN; a build without it
/// (TAPESTRY_HAS_ONEDNN unset: CMakeLists.txt) computes float32 products with OpenBLAS and bfloat16
/// ones in float32.
#pragma once

#include <cstdint>
#include <vector>

namespace tapestry {

/// The library that computes float32 products on the CPU (ops/blas.h's cpu_gemm; float64 always
/// takes OpenBLAS).
enum class Float32Gemm { OpenBlas, OneDnn };

/// Whether this build has oneDNN (TAPESTRY_HAS_ONEDNN, CMakeLists.txt).
bool cpu_onednn_available();

/// oneDNN where this build has it, else OpenBLAS; the environment variable TAPESTRY_CPU_GEMM (openblas
/// or onednn, read once) or a Float32GemmScope chooses. Throws where the variable names an unknown
/// library or one this build lacks.
Float32Gemm cpu_float32_gemm();

/// "openblas" or "onednn".
const char* to_string(Float32Gemm gemm);

/// Makes float32 products use `gemm` while it lives (tests recorded with one library, comparisons of
/// the two). Throws where this build lacks it. Not for use while other threads run products.
class Float32GemmScope {
 public:
  /// Chooses `gemm` (OpenBLAS, or oneDNN in a build that has it).
  explicit Float32GemmScope(Float32Gemm gemm);
  /// Restores the choice before this scope.
  ~Float32GemmScope();
  Float32GemmScope(const Float32GemmScope&) = delete;
  Float32GemmScope& operator=(const Float32GemmScope&) = delete;

 private:
  int previous_;
};

/// c (m × n, row stride ldc) = alpha · op(a) · op(b) + beta · c in float32 through oneDNN's GEMM, as
/// ops/blas.h's cpu_gemm (row-major; beta = 0 never reads c). On the calling thread inside an OpenMP
/// parallel region (matmul splits its work so), on OpenMP's threads outside one. Throws in a build
/// without oneDNN.
void onednn_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

/// A bfloat16 matrix, or a batch of them, in memory: dims and strides in elements, the batch dims
/// first, then rows and columns (a transposed operand is its strides swapped). A batch dim along
/// which the operand is broadcast has size 1.
struct Bf16Matrix {
  void* data = nullptr;          ///< the first element's bfloat16
  std::vector<int64_t> dims;     ///< batch dims (1 where broadcast), then rows and columns
  std::vector<int64_t> strides;  ///< in elements, one per dim
};

/// Whether cpu_bf16_gemm runs here: this build has oneDNN (TAPESTRY_HAS_ONEDNN, CMakeLists.txt) and
/// this CPU has bfloat16 arithmetic (AVX-512 BF16; oneDNN takes AMX where the CPU has it).
bool cpu_bf16_gemm_available();

/// out = a · b + beta · out, bfloat16 operands and result, the products summed in float32 and rounded
/// once to nearest even: a GPU's bfloat16 GEMM, on the CPU through oneDNN's matmul, on OpenMP's
/// threads. a is (batch…, m, k), b (batch…, k, n), out (batch…, m, n) with every batch dim of its
/// full size. Returns false, computing nothing, where it is not available or oneDNN has no kernel
/// for these layouts (the caller then computes in float32).
bool cpu_bf16_gemm(const Bf16Matrix& a, const Bf16Matrix& b, const Bf16Matrix& out, float beta);

}  // namespace tapestry
