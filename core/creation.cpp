#include "core/creation.h"

namespace tapestry {

Tensor empty(const Shape& shape, Options options) {
  check_shape(shape, "empty", static_cast<int64_t>(element_size(options.dtype)));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<std::size_t>(numel(shape)) * element_size(options.dtype), options.device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = options.dtype;
  return Tensor(std::move(impl));
}

Tensor empty_like(const Tensor& like) { return empty(like.shape(), like.options()); }

// The values are laid out on the host, then their bytes go to `device` as they are.
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  check_shape(shape, "from_vector", static_cast<int64_t>(sizeof(T)));
  TP_CHECK(static_cast<int64_t>(values.size()) == numel(shape), "from_vector", "got ", values.size(),
           " values for shape ", to_string(shape), " (", numel(shape), " elements)");
  Tensor host = empty(shape, {dtype_of<T>(), Device::cpu()});
  T* data = host.data<T>();
  const int64_t n = host.numel();
#pragma omp parallel for if (n > 32768)
  for (int64_t i = 0; i < n; ++i) data[i] = values[static_cast<size_t>(i)];
  if (device.is_cpu()) return host;
  Tensor out = empty(shape, {dtype_of<T>(), device});
  copy_bytes(out.raw_data(), device, host.raw_data(), Device::cpu(), static_cast<size_t>(n) * sizeof(T));
  return out;
}

template Tensor from_vector<float>(const std::vector<float>&, const Shape&, Device);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&, Device);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, const Shape&, Device);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&, Device);
template Tensor from_vector<bool>(const std::vector<bool>&, const Shape&, Device);

}  // namespace tapestry
