/// @file
/// Shape ops. Views share storage with their input (no copy): view, reshape of a contiguous
/// tensor, permute, transpose, slice, select, expand, squeeze, unsqueeze, split. Copies: concat,
/// stack, pad, contiguous (when not already), clone, to.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace tapestry {

///@{
/// One dim may be -1 (inferred). view needs a contiguous tensor; reshape copies when it must.
Tensor view(const Tensor& x, const Shape& shape);
Tensor reshape(const Tensor& x, const Shape& shape);
///@}
Tensor flatten(const Tensor& x);  ///< to 1-d

/// x with its dims reordered: dim i of the result is dim dims[i] of x (dims lists each of x's dims
/// once; negative ones count from the end).
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
/// x with dims dim0 and dim1 swapped.
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
/// Elements start, start + step, ... < end along dim; negative start/end count from the end and
/// both are clamped to [0, size] as in Python. step > 0.
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
/// Index `index` of dim, which is removed.
Tensor select(const Tensor& x, int64_t dim, int64_t index);
/// Broadcasts size-1 dims (and new leading dims) to `shape`; -1 keeps a size.
Tensor expand(const Tensor& x, const Shape& shape);
Tensor squeeze(const Tensor& x, int64_t dim);  ///< dim must have size 1
/// x with a new dim of size 1 at `dim` of the result (negative counts from the result's end).
Tensor unsqueeze(const Tensor& x, int64_t dim);

/// The tensors joined along the existing dim `dim` (at least one, of one dtype and device, with
/// the same shape outside dim).
Tensor concat(const std::vector<Tensor>& tensors, int64_t dim);
/// The tensors (at least one, of one shape, dtype and device) joined along a new dim `dim`.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
/// Pieces of the given sizes along dim (they must add up to the dim's size).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);
/// Pieces of `size` along dim (the last may be smaller).
std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim);
/// Constant padding. pads = {before, after} for the last dim, then for the one before, ...
/// (as many pairs as dims to pad); all non-negative.
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, double value = 0.0);

// Reordering and repeating (copies; gradients come from the ops they are built of: index_select,
// where, expand, reshape). Any dtype.
/// x with the order of elements reversed along each of `dims` (torch.flip).
Tensor flip(const Tensor& x, const std::vector<int64_t>& dims);
/// x shifted by shifts[k] along dims[k], elements that leave one end coming back at the other:
/// y[i] = x[(i − shift) mod n] (torch.roll with dims given; shifts may be negative or exceed n).
Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims);
/// x tiled repeats[d] times along each dim (torch.repeat): as many counts as dims or more (extra
/// counts add leading dims); a count of 0 gives an empty dim.
Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats);
///@{
/// The lower / upper triangle of the last two dims (..., rows, cols): x[..., i, j] where
/// j − i ≤ diagonal (tril) or j − i ≥ diagonal (triu), 0 elsewhere (a NaN there too). diagonal = 0
/// is the main diagonal, > 0 above it, < 0 below.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
///@}

/// x's data without its history: a view sharing storage that requires no gradient (Tensor::detach).
Tensor detach(const Tensor& x);

/// x itself when already contiguous, else a contiguous copy.
Tensor contiguous(const Tensor& x);
/// Always a new contiguous copy.
Tensor clone(const Tensor& x);
///@{
/// Converted / moved copies; x itself when nothing changes.
Tensor to(const Tensor& x, DType dtype);
Tensor to(const Tensor& x, Device device);
///@}

}  // namespace tapestry
