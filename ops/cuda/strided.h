// Addressing strided, broadcast operands from a kernel: the shape and every operand's strides,
// simplified on the host and passed to the kernel by value. Plain C++ (the CPU suite tests it);
// offsets() is evaluated on both sides.
#pragma once

#include <array>
#include <cstdint>

#include "core/macros.h"
#include "core/tensor.h"

namespace tapestry {
// The strides that make t read as if it had `shape` (ops/loops.cpp).
Strides broadcast_strides(const Tensor& t, const Shape& shape);
}  // namespace tapestry

namespace tapestry::cuda {

// Dims a kernel addresses after simplification (see make_indexer); more is refused with an Error.
constexpr int kMaxDims = 12;

// N operands over one shape of `ndim` dims. Element i (row-major over sizes) of operand k lies at
// offset Σ_d index_d(i) · strides[d][k], in elements.
template <int N>
struct StridedIndexer {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims][N] = {};

  TP_HOST_DEVICE void offsets(int64_t i, int64_t (&out)[N]) const {
    for (int k = 0; k < N; ++k) out[k] = 0;
    for (int d = ndim - 1; d > 0; --d) {
      const int64_t index = i % sizes[d];
      i /= sizes[d];
      for (int k = 0; k < N; ++k) out[k] += index * strides[d][k];
    }
    if (ndim > 0)  // the outermost index is what is left: no division needed
      for (int k = 0; k < N; ++k) out[k] += i * strides[0][k];
  }
};

// The indexer of `shape` with each operand's strides (already broadcast to shape). Size-1 dims are
// dropped and neighbouring dims that every operand walks as one (outer stride = inner stride ×
// inner size) are merged, so that contiguous operands become one dim whose offsets need no division,
// and tensors of more than kMaxDims dims usually still fit.
template <int N>
StridedIndexer<N> make_indexer(const char* op, const Shape& shape, const std::array<Strides, N>& strides) {
  StridedIndexer<N> ix;
  int64_t sizes[kMaxDims + 1];
  int64_t merged[kMaxDims + 1][N];
  int ndim = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool joins = ndim > 0;
    for (int k = 0; joins && k < N; ++k) joins = merged[ndim - 1][k] == strides[k][d] * shape[d];
    if (joins) {
      sizes[ndim - 1] *= shape[d];
      for (int k = 0; k < N; ++k) merged[ndim - 1][k] = strides[k][d];
      continue;
    }
    TP_CHECK(ndim < kMaxDims, op, "the CUDA kernels address at most ", kMaxDims,
             " dims that cannot be merged, got shape ", to_string(shape), "; make the operands contiguous");
    sizes[ndim] = shape[d];
    for (int k = 0; k < N; ++k) merged[ndim][k] = strides[k][d];
    ++ndim;
  }
  ix.ndim = ndim;
  for (int d = 0; d < ndim; ++d) {
    ix.sizes[d] = sizes[d];
    for (int k = 0; k < N; ++k) ix.strides[d][k] = merged[d][k];
  }
  return ix;
}

}  // namespace tapestry::cuda
