/// @file
/// Embedding lookup: rows of a table picked by integer indices.
#pragma once

#include "core/tensor.h"

namespace tapestry {

/// out[i..., :] = table[indices[i...], :] for a floating table (V, D) and int32 / int64 indices of
/// any shape; out has shape indices.shape + (D,). Every index must lie in [0, V): the op checks them
/// all before it computes or writes anything. padding_idx ∈ [0, V) names a row whose lookups return
/// it as usual but which never receives a gradient; −1 means none.
/// Gradient: dtable[v] += Σ over positions i with indices[i] = v (v ≠ padding_idx) of dy[i]
/// (an index-add; repeated indices sum). A bfloat16 table's rows are copied bit for bit and its
/// gradient is added in float32 and rounded once.
Tensor embedding(const Tensor& table, const Tensor& indices, int64_t padding_idx = -1);

}  // namespace tapestry
