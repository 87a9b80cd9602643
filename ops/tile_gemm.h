/// @file
/// The small matrix products inside fused attention's tiles on the CPU (ops/attention.cpp): a tile of
/// 128 queries × 512 keys against head dims of 32–128. BLAS packs both operands of every such call
/// into its own layout first, which took as long as a third of its arithmetic on these shapes and
/// a sixth of a full-attention training step (docs/PERFORMANCE.md); these kernels read the operands
/// where they lie, from registers blocked 6 rows × 64 columns, 8 × 32 or 12 × 16 (AVX-512), or 4 × 24 (AVX2).
///
/// With AVX2 or AVX-512 (core/cpu_capability.h), every element of C is Σ_p a_ip b_pj summed in the
/// order p = 0, 1, …, k − 1 by fused multiply-adds, then scaled: the same bits under both and at every
/// thread count. The baseline, whose only fused multiply-add is libm's (a call per product), and
/// float64 run BLAS instead, in BLAS's order of summation: there the bits differ in the last places.
#pragma once

#include <cstdint>

namespace tapestry {

/// c (m × n, row stride ldc) = alpha · A B + beta · c, where A's element (i, p) lies at
/// a[i · a_row + p · a_col] (a transposed A is a swap of its strides) and B is row-major (k × n, row
/// stride ldb); one of A's strides must be 1. beta = 0 overwrites c without reading it; otherwise the
/// sum is alpha · (A B) rounded, then beta · c added. float32 or float64. Runs on the calling thread
/// (BLAS too, inside a SingleThreadedBlas scope, ops/blas.h, as fused attention holds one).
template <class T>
void tile_gemm(int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t a_row, int64_t a_col, const T* b,
               int64_t ldb, T beta, T* c, int64_t ldc);

/// dst (cols × rows, row stride ld_dst) = srcᵀ, src being rows × cols with row stride ld_src: the
/// layout tile_gemm's B needs for a product with a transposed right operand (S = Q Kᵀ).
template <class T>
void transpose_rows(int64_t rows, int64_t cols, const T* src, int64_t ld_src, T* dst, int64_t ld_dst);

}  // namespace tapestry
