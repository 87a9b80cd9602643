/// @file
/// The small matrix products inside fused attention's tiles on the CPU (ops/attention.cpp): a tile of
/// 128 queries × 512 keys against head dims of 32–128. BLAS packs both operands of every such call
/// into its own layout first, which took as long as a third of its arithmetic on these shapes and
/// a sixth of a full-attention training step (docs/PERFORMANCE.md); these kernels read the operands
/// where they lie, from registers blocked 6 rows × 64 columns (AVX-512) or 4 × 24 (AVX2).
///
/// Every element of C is Σ_p a_ip b_pj summed in the order p = 0, 1, …, k − 1 by fused multiply-adds,
/// then scaled: the same bits at every CPU capability (core/cpu_capability.h) and every thread count.
/// The baseline (no FMA instruction) gets the same bits from libm's fma, one call per product: slow,
/// for CPUs without AVX2 and for comparing the capabilities.
#pragma once

#include <cstdint>

namespace tapestry {

/// c (m × n, row stride ldc) = alpha · A B + beta · c, where A's element (i, p) lies at
/// a[i · a_row + p · a_col] (a transposed A is a swap of its strides) and B is row-major (k × n, row
/// stride ldb). beta = 0 overwrites c without reading it; otherwise the sum is alpha · (A B) rounded,
/// then beta · c added. float32 or float64 (float64 runs the baseline's loop).
template <class T>
void tile_gemm(int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t a_row, int64_t a_col, const T* b,
               int64_t ldb, T beta, T* c, int64_t ldc);

/// dst (cols × rows, row stride ld_dst) = srcᵀ, src being rows × cols with row stride ld_src: the
/// layout tile_gemm's B needs for a product with a transposed right operand (S = Q Kᵀ).
template <class T>
void transpose_rows(int64_t rows, int64_t cols, const T* src, int64_t ld_src, T* dst, int64_t ld_dst);

}  // namespace tapestry
