/// @file
/// bfloat16 matrix products on the CPU through oneDNN's matmul, on the CPU's bfloat16 instructions
/// (AVX-512 BF16, and AMX where the CPU has it), for matmul (ops/matmul.cpp). Only ops/bf16_gemm.cpp
/// sees oneDNN; a build without it (TAPESTRY_HAS_ONEDNN unset: CMakeLists.txt) computes bfloat16
/// products in float32 instead.
#pragma once

#include <cstdint>
#include <vector>

namespace tapestry {

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
