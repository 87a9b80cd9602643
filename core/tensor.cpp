#include "core/tensor.h"

#include <cstring>
#include <iomanip>

#include "core/creation.h"
#include "core/dispatch.h"

namespace tapestry {

int64_t Tensor::size(int64_t d) const { return shape()[normalize_dim(d, dim(), "size")]; }

bool Tensor::is_contiguous() const {
  const TensorImpl& self = impl();
  if (numel() == 0) return true;  // no element to misplace
  int64_t expected = 1;
  for (size_t i = self.shape.size(); i-- > 0;) {
    if (self.shape[i] == 1) continue;
    if (self.strides[i] != expected) return false;
    expected *= self.shape[i];
  }
  return true;
}

Tensor make_view(const Tensor& base, Shape shape, Strides strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl().storage;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

// A plain copy, not the ops' contiguous() / to(): reading values out is core's business, below the
// ops layer, and a copy changes no bit. A strided view on a GPU brings the span of storage it reads
// (from its first element to its last) to the host and is gathered there.
Tensor host_contiguous(const Tensor& tensor) {
  if (tensor.device().is_cpu() && tensor.is_contiguous()) return tensor;
  Tensor out = empty(tensor.shape(), {tensor.dtype(), Device::cpu()});
  const int64_t n = tensor.numel();
  if (n == 0) return out;
  const size_t size = element_size(tensor.dtype());
  if (tensor.is_contiguous()) {
    copy_bytes(out.raw_data(), Device::cpu(), tensor.raw_data(), tensor.device(), static_cast<size_t>(n) * size);
    return out;
  }
  const Shape& shape = tensor.shape();
  const Strides& strides = tensor.strides();
  int64_t span = 1;  // elements from the first to the last one the view reads; strides are never negative
  for (size_t d = 0; d < shape.size(); ++d) span += (shape[d] - 1) * strides[d];
  Tensor staged = tensor;
  if (!tensor.device().is_cpu()) {
    staged = empty({span}, {tensor.dtype(), Device::cpu()});
    copy_bytes(staged.raw_data(), Device::cpu(), tensor.raw_data(), tensor.device(), static_cast<size_t>(span) * size);
  }
  visit_all(tensor.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(staged.raw_data());
    T* dst = static_cast<T*>(out.raw_data());
    std::vector<int64_t> index(shape.size(), 0);  // row-major counter over shape
    int64_t at = 0;                                // offset of `index` in src
    for (int64_t i = 0; i < n; ++i) {
      dst[i] = src[at];
      for (size_t d = shape.size(); d-- > 0;) {
        at += strides[d];
        if (++index[d] < shape[d]) break;
        at -= strides[d] * shape[d];
        index[d] = 0;
      }
    }
  });
  return out;
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  const Tensor host = host_contiguous(*this);
  std::vector<T> out(static_cast<size_t>(host.numel()));
  visit_all(dtype(), [&](auto tag) {
    using S = decltype(tag);
    const S* src = static_cast<const S*>(host.raw_data());
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(src[i]);
  });
  return out;
}

template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;

namespace {

// Prints dims [dim, ndim) of `values` (row-major) from `start`, abbreviating long dims.
void print_values(std::ostream& out, const std::vector<double>& values, const Shape& shape,
                  size_t dim, int64_t start, DType dtype) {
  if (dim == shape.size()) {
    const double v = values[static_cast<size_t>(start)];
    if (dtype == DType::Bool) out << (v != 0 ? "true" : "false");
    else if (is_integer(dtype)) out << static_cast<int64_t>(v);
    else out << std::setprecision(6) << v;
    return;
  }
  const int64_t n = shape[dim];
  const int64_t stride = numel(Shape(shape.begin() + static_cast<long>(dim) + 1, shape.end()));
  const bool abbreviate = n > 8 && numel(shape) > 256;
  out << "[";
  for (int64_t i = 0; i < n; ++i) {
    if (abbreviate && i == 3) {
      out << ", ...";
      i = n - 3;
    }
    if (i) out << (dim + 1 == shape.size() ? ", " : ",\n" + std::string(dim + 8, ' '));
    print_values(out, values, shape, dim + 1, start + i * stride, dtype);
  }
  out << "]";
}

}  // namespace

std::ostream& operator<<(std::ostream& out, const Tensor& tensor) {
  if (!tensor.defined()) return out << "tensor(undefined)";
  out << "tensor(";
  print_values(out, tensor.to_vector<double>(), tensor.shape(), 0, 0, tensor.dtype());
  out << ", shape=" << to_string(tensor.shape()) << ", dtype=" << tensor.dtype();
  if (!tensor.device().is_cpu()) out << ", device=" << tensor.device();
  if (tensor.requires_grad()) out << ", requires_grad";
  return out << ")";
}

}  // namespace tapestry
