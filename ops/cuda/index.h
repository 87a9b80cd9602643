// CUDA launchers of the index ops (ops/cuda/index.cu). Plain C++: ops/index.cpp calls them for
// tensors on a GPU, after its checks, with contiguous index tensors (int32 or int64) already known to
// be in range; outputs are allocated by the caller on the inputs' device. Shapes as in ops/index.h:
// around the indexed dim d, a shape reads as (outer, size, inner).
//
// Determinism: the accumulating ops never let two threads add into one element. They sort the
// positions of src by the output element they go to (a stable CUB radix sort), and one thread per
// output element adds its run of src in position order, starting from the value already there —
// exactly the CPU's order of additions, so sums are bit for bit the CPU's.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace tapestry::cuda {

// The first element of a contiguous int32 / int64 `index` outside [lo, hi), in row-major order, and
// its value; position = index.numel() when there is none. Waits for the device (the caller throws,
// or goes on to launch kernels that may trust the indices).
struct OutOfRange {
  int64_t position;
  int64_t value;
};
OutOfRange first_out_of_range(const char* op, const Tensor& index, int64_t lo, int64_t hi);

// y[o, j, i] = x[o, index[o, j, i], i]: y contiguous of index's shape, x any strides (any dtype).
void gather(const char* op, const Tensor& y, const Tensor& x, int64_t d, const Tensor& index);
// y[o, index[o, j, i], i] += src[o, j, i]: y contiguous and owned, src contiguous of index's shape
// (numeric).
void scatter_add(const char* op, const Tensor& y, int64_t d, const Tensor& index, const Tensor& src);
// y[o, j, :] = x[o, index[j], :]: y and x contiguous, index 1-d (any dtype).
void index_select(const char* op, const Tensor& y, const Tensor& x, int64_t d, const Tensor& index);
// y[o, index[j], :] += src[o, j, :]: y contiguous and owned, src contiguous, index 1-d (numeric).
void index_add(const char* op, const Tensor& y, int64_t d, const Tensor& index, const Tensor& src);
// y[..., c] = (index[...] == c): y contiguous of index's shape + (num_classes,), any dtype.
void one_hot(const Tensor& y, const Tensor& index, int64_t num_classes);

}  // namespace tapestry::cuda
