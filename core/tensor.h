/// @file
/// Tensor: a cheap handle to shared Storage + shape + strides + offset + dtype.
///
/// Copying a Tensor copies the handle, not the data. Views (reshape of a contiguous tensor, permute,
/// slice, select, expand, ...) share storage and differ in shape/strides/offset; they are ops in
/// ops/shape.h. Everything that computes is a free function in namespace tapestry (ops/*.h); the
/// class itself only describes data and carries the autograd state.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/storage.h"

namespace tapestry {

class Tensor;
struct AutogradMeta;

/// Observes the gradient of a tensor during backward (see Tensor::register_hook).
using GradHook = std::function<void(const Tensor& grad)>;

/// Whether backward keeps the tape entries it ran, for another backward (core/autograd.h).
enum class Retain { No, Yes };

/// The dtype and device of a new tensor (creation functions take one).
struct Options {
  DType dtype = DType::Float32;  ///< element type
  Device device = Device::cpu();  ///< where the data lives
};

/// What a Tensor handle points to: a view (shape, strides, offset, dtype) of a Storage, and the
/// autograd state.
struct TensorImpl {
  std::shared_ptr<Storage> storage;  ///< the data, shared by every view of it
  Shape shape;  ///< the sizes
  Strides strides;     ///< in elements; 0 along broadcast (expanded) dims
  int64_t offset = 0;  ///< in elements, from the start of storage
  DType dtype = DType::Float32;  ///< element type
  std::shared_ptr<AutogradMeta> autograd;  ///< null unless the tensor requires grad
};

/// A cheap handle to a view of shared storage: copying a Tensor copies the handle, not the data.
/// Everything that computes on tensors is a free function (ops/); views share storage.
class Tensor {
 public:
  Tensor() = default;  ///< undefined: holds nothing
  /// A handle to `impl` (how ops make their results).
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  ///@{
  /// The view's properties: whether the handle holds a tensor, sizes, strides and offset (in
  /// elements), number of dims and of elements, dtype, device, {dtype, device}, and whether the
  /// strides are row-major without gaps. All but defined() throw Error on an undefined tensor.
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Strides& strides() const { return impl().strides; }
  int64_t offset() const { return impl().offset; }
  int64_t dim() const { return static_cast<int64_t>(impl().shape.size()); }
  int64_t size(int64_t dim) const;  ///< negative dims count from the end
  int64_t numel() const { return tapestry::numel(impl().shape); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device(); }
  Options options() const { return {dtype(), device()}; }
  bool is_contiguous() const;
  ///@}

  /// Pointer to the first element (host or device memory); checks that T matches the dtype.
  template <class T>
  T* data() const {
    TP_CHECK(dtype_of<T>() == dtype(), "data", "requested ", dtype_name(dtype_of<T>()),
             " from a tensor of dtype ", dtype());
    return static_cast<T*>(raw_data());
  }
  /// data() without the dtype check.
  void* raw_data() const {
    return static_cast<char*>(impl().storage->data()) + impl().offset * element_size(dtype());
  }
  /// The storage this tensor views.
  Storage& storage() const { return *impl().storage; }

  /// The single element (numel must be 1), converted to T; copies from the GPU if needed.
  template <class T>
  T item() const;
  /// All elements in row-major order, converted to T; copies from the GPU if needed.
  template <class T>
  std::vector<T> to_vector() const;

  // ---- autograd (core/autograd.h) ----
  /// Whether the tape tracks this tensor (a parameter, or a result computed from one).
  bool requires_grad() const { return defined() && impl().autograd != nullptr; }
  /// Marks a leaf (a tensor no recorded op produced) as a parameter whose gradient is wanted.
  Tensor& set_requires_grad(bool requires_grad);
  /// Whether this tensor was not produced by a recorded op.
  bool is_leaf() const;
  /// The accumulated gradient: of a leaf, or of a non-leaf after retain_grad(); undefined if none.
  Tensor grad() const;
  /// Drops the accumulated gradient (grad() becomes undefined; the next backward assigns it).
  void zero_grad() const;
  /// Keeps the gradient of a non-leaf tensor in grad() after backward.
  void retain_grad() const;
  /// `hook` sees this tensor's complete gradient of each backward pass, before it is accumulated.
  /// It reads it and must not change it: the gradient may be shared with other tensors'.
  void register_hook(GradHook hook) const;
  /// Back-propagates from this tensor: a scalar, or any shape with an explicit seed gradient.
  void backward(Retain retain = Retain::No) const;
  /// `seed` is the gradient of this tensor, of its shape.
  void backward(const Tensor& seed, Retain retain = Retain::No) const;
  /// The same data, cut from the tape: no gradient flows through the result.
  Tensor detach() const;

  /// The implementation; throws Error on an undefined tensor.
  TensorImpl& impl() const {
    TP_CHECK(impl_ != nullptr, "tensor", "use of an undefined tensor");
    return *impl_;
  }
  /// The shared implementation (null when undefined).
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

/// Prints values (abbreviated past a few hundred), shape, dtype and device.
std::ostream& operator<<(std::ostream& out, const Tensor& tensor);

/// A new tensor over `storage` (nothing is copied or recorded).
Tensor make_view(const Tensor& base, Shape shape, Strides strides, int64_t offset);

/// Internal: the contiguous host copy used by item() / to_vector().
Tensor host_contiguous(const Tensor& tensor);

template <class T>
T Tensor::item() const {
  TP_CHECK(numel() == 1, "item", "expected a tensor with one element, got shape ", to_string(shape()));
  return to_vector<T>()[0];
}

}  // namespace tapestry
