#include "core/shape.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace tapestry {

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    if (__builtin_mul_overflow(n, s, &n))
      fail("numel", "shape ", to_string(shape), " has more elements than int64 can count");
  }
  return n;
}

Strides contiguous_strides(const Shape& shape) {
  Strides strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    // The stride before the outermost dim is never stored: it may exceed int64 only when the
    // shape's product does, which check_shape refuses.
    if (i > 0) stride = checked_mul(stride, std::max<int64_t>(shape[i], 1), "contiguous_strides", "a stride");
  }
  return strides;
}

int64_t checked_mul(int64_t a, int64_t b, const char* op, const char* what) {
  int64_t out;
  if (__builtin_mul_overflow(a, b, &out))
    fail(op, what, " overflows int64: ", a, " * ", b);
  return out;
}

int64_t checked_add(int64_t a, int64_t b, const char* op, const char* what) {
  int64_t out;
  if (__builtin_add_overflow(a, b, &out))
    fail(op, what, " overflows int64: ", a, " + ", b);
  return out;
}

void check_shape(const Shape& shape, const char* op, int64_t element_size) {
  int64_t span = element_size;  // bytes of the shape with every 0 counted as 1
  for (int64_t s : shape) {
    TP_CHECK(s >= 0, op, "negative size in shape ", to_string(shape));
    TP_CHECK(!__builtin_mul_overflow(span, std::max<int64_t>(s, 1), &span), op, "shape ",
             to_string(shape), " is too large: its size in bytes (", element_size,
             " per element) does not fit in int64");
  }
}

std::string to_string(const Shape& shape) {
  std::ostringstream out;
  out << "(";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  if (shape.size() == 1) out << ",";
  out << ")";
  return out.str();
}

std::string index_string(int64_t flat, const Shape& shape) {
  Shape index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return to_string(index);
}

int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op) {
  TP_CHECK(dim >= -ndim && dim < ndim, op, "dim ", dim, " is out of range for a tensor of ", ndim,
           " dims");
  return dim < 0 ? dim + ndim : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    TP_CHECK(da == db || da == 1 || db == 1, op, "shapes ", to_string(a), " and ", to_string(b),
             " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace tapestry
