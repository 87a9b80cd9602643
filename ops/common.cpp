#include "ops/common.h"

namespace tapestry {

void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    TP_CHECK(t->defined(), op, "got an undefined tensor");
    if (!first) first = t;
    TP_CHECK(t->device() == first->device(), op, "expected all tensors on one device, got ",
             first->device(), " (shape ", to_string(first->shape()), ") and ", t->device(),
             " (shape ", to_string(t->shape()), ")");
  }
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  TP_CHECK(a.dtype() == b.dtype(), op, "dtype mismatch: ", a.dtype(), " ", to_string(a.shape()),
           " and ", b.dtype(), " ", to_string(b.shape()), " (convert one with to(x, dtype))");
}

void check_floating(const char* op, const Tensor& x) {
  TP_CHECK(x.defined(), op, "got an undefined tensor");
  TP_CHECK(is_floating(x.dtype()), op, "expected a floating tensor (float32, float64 or bfloat16), got ",
           x.dtype(), " of shape ", to_string(x.shape()));
}

void check_cpu(const char* op, const Tensor& x) {
  TP_CHECK(x.device().is_cpu(), op, "has no CUDA kernel in this build; tensor of shape ",
           to_string(x.shape()), " is on ", x.device());
}

}  // namespace tapestry
