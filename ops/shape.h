// Shape ops. Views share storage with their input (no copy): view, reshape of a contiguous
// tensor, permute, transpose, slice, select, expand, squeeze, unsqueeze, split. Copies: concat,
// stack, pad, contiguous (when not already), clone, to.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace tapestry {

// One dim may be -1 (inferred). view needs a contiguous tensor; reshape copies when it must.
Tensor view(const Tensor& x, const Shape& shape);
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor flatten(const Tensor& x);  // to 1-d

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
// Elements start, start + step, ... < end along dim; negative start/end count from the end and
// both are clamped to [0, size] as in Python. step > 0.
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
// Index `index` of dim, which is removed.
Tensor select(const Tensor& x, int64_t dim, int64_t index);
// Broadcasts size-1 dims (and new leading dims) to `shape`; -1 keeps a size.
Tensor expand(const Tensor& x, const Shape& shape);
Tensor squeeze(const Tensor& x, int64_t dim);  // dim must have size 1
Tensor unsqueeze(const Tensor& x, int64_t dim);

Tensor concat(const std::vector<Tensor>& tensors, int64_t dim);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
// Pieces of the given sizes along dim (they must add up to the dim's size).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);
// Pieces of `size` along dim (the last may be smaller).
std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim);
// Constant padding. pads = {before, after} for the last dim, then for the one before, ...
// (as many pairs as dims to pad); all non-negative.
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, double value = 0.0);

// x itself when already contiguous, else a contiguous copy.
Tensor contiguous(const Tensor& x);
// Always a new contiguous copy.
Tensor clone(const Tensor& x);
// Converted / moved copies; x itself when nothing changes.
Tensor to(const Tensor& x, DType dtype);
Tensor to(const Tensor& x, Device device);

}  // namespace tapestry
