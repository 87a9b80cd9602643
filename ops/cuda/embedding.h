// CUDA launchers of the embedding lookup and its index-add (ops/cuda/embedding.cu). Plain C++:
// ops/embedding.cpp calls them for tensors on a GPU, after checking every index on the device
// (ops/cuda/index_scan.h). Shapes: table, dtable (V, D); indices (N) once flattened; out, dy (N, D).
#pragma once

#include "core/tensor.h"

namespace tapestry::cuda {

// out[n, :] = table[indices[n], :], for a contiguous floating table, contiguous int32 / int64
// indices (all in [0, V)) and a contiguous out of the table's dtype.
void embedding_forward(const Tensor& table, const Tensor& indices, const Tensor& out);

// dtable[v, :] += Σ_{n : indices[n] = v ≠ padding_idx} dy[n, :], in place, adding the rows of dy in
// increasing n one after another in the table's dtype: the CPU's sums, bit for bit, on every run.
// dy, indices and dtable contiguous.
void embedding_backward(const Tensor& dy, const Tensor& indices, int64_t padding_idx, const Tensor& dtable);

}  // namespace tapestry::cuda
