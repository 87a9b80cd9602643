/// @file
/// Shapes and strides. Both are in elements, not bytes.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace tapestry {

/// A tensor's sizes, outermost first; {} is a 0-d tensor (one element).
using Shape = std::vector<int64_t>;
/// Elements to step per index along each dim (0 along broadcast dims).
using Strides = std::vector<int64_t>;

/// The number of elements. Shapes that tensors hold always pass check_shape, so this never
/// overflows for them; for any other shape it throws Error rather than wrap.
int64_t numel(const Shape& shape);
/// The row-major strides of a contiguous tensor of `shape`.
Strides contiguous_strides(const Shape& shape);

/// Size arithmetic is checked: a product or sum that does not fit in int64 is refused with an
/// Error naming `op`, never wrapped. `what` names the quantity in the message.
int64_t checked_mul(int64_t a, int64_t b, const char* op, const char* what);
/// a + b, checked as checked_mul is.
int64_t checked_add(int64_t a, int64_t b, const char* op, const char* what);

/// The shapes a tensor may take: every size non-negative, and the element count, every contiguous
/// stride (the product of the trailing sizes, a 0 counted as 1) and the byte count at
/// `element_size` bytes per element all fit in int64. Throws Error naming `op` and the shape.
void check_shape(const Shape& shape, const char* op, int64_t element_size = 1);
std::string to_string(const Shape& shape);  ///< "(2, 3)"; a 1-d shape prints as "(4,)"
/// The multi-index of row-major position `flat` in `shape`, printed: index_string(5, {2, 3}) = "(1, 2)".
std::string index_string(int64_t flat, const Shape& shape);

/// Wraps a possibly negative dim into [0, ndim); throws Error naming `op` when out of range.
int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op);

/// The broadcast of two shapes (numpy rules); throws Error naming `op` when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace tapestry
