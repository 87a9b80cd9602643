/// @file
/// Index ops: gather / scatter_add and index_select / index_add (two adjoint pairs), masked_select,
/// and one_hot.
///
/// Index tensors are int32 or int64. Every index must lie in [0, size) of the dim it indexes:
/// negative indices are not wrapped around, and an index out of range is refused with an Error
/// naming the op before anything is computed or written. Duplicate indices accumulate (scatter_add,
/// index_add). The "add" ops are out of place: they return a new tensor, x plus the scattered src.
/// Results are deterministic: each output element is summed by one thread, in index order.
#pragma once

#include "core/tensor.h"

namespace tapestry {

/// y[i][j][k] = x[i][index[i][j][k]][k]   (shown for dim = 1; torch.gather)
/// index has as many dims as x and is no larger than x outside `dim`; y has index's shape.
/// Differentiable in x: dx = scatter_add(0, dim, index, dy).
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);

/// y = x;  y[i][index[i][j][k]][k] += src[i][j][k]   (dim = 1)
/// src has index's shape (unlike torch, src may not be larger than index), and index is no larger
/// than x outside `dim`; y has x's shape. Differentiable in x (dx = dy) and src
/// (dsrc = gather(dy, dim, index)).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

/// The slices index[0], index[1], ... of x along dim: y.select(dim, j) = x.select(dim, index[j]).
/// index is 1-d (m,); y has x's shape with size m along dim. Differentiable in x:
/// dx = index_add(0, dim, index, dy).
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);

/// y = x;  y.select(dim, index[j]) += src.select(dim, j)
/// index is 1-d (m,); src has x's shape with size m along dim. Differentiable in x (dx = dy) and
/// src (dsrc = index_select(dy, dim, index)).
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

/// The elements of x where mask (bool) is true, in row-major order, as a 1-d tensor; x and mask
/// broadcast together (torch.masked_select). Differentiable in x: dx = dy scattered back to the
/// selected positions (0 elsewhere). The mask is read on the host to size the result.
Tensor masked_select(const Tensor& x, const Tensor& mask);

/// y[..., c] = (index[...] == c): shape index.shape + (num_classes,), every index in
/// [0, num_classes). The dtype defaults to float32, the working type, because one-hot rows are
/// mostly multiplied (label smoothing, cluster membership matrices); pass DType::Int64 for torch's.
Tensor one_hot(const Tensor& index, int64_t num_classes, DType dtype = DType::Float32);

}  // namespace tapestry
