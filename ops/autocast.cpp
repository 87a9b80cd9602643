#include "ops/autocast.h"

#include "core/autograd.h"
#include "ops/elementwise.h"
#include "ops/shape.h"

namespace tapestry {

namespace {
thread_local bool autocast_on = false;
}  // namespace

bool autocast_enabled() { return autocast_on; }

AutocastScope::AutocastScope(bool enabled) : previous_(autocast_on) { autocast_on = enabled; }
AutocastScope::~AutocastScope() { autocast_on = previous_; }

Tensor autocast_lower(const Tensor& x) {
  return autocast_on && x.defined() && x.dtype() == DType::Float32 ? to(x, DType::BFloat16) : x;
}

Tensor autocast_float32(const Tensor& x) {
  return autocast_on && x.defined() && x.dtype() == DType::BFloat16 ? to(x, DType::Float32) : x;
}

bool autocast_widens(std::initializer_list<const Tensor*> inputs) {
  if (!autocast_on) return false;
  for (const Tensor* x : inputs)
    if (x->defined() && x->dtype() == DType::BFloat16) return true;
  return false;
}

std::pair<Tensor, Tensor> autocast_promote(const Tensor& a, const Tensor& b) {
  const auto mixed = [](DType x, DType y) { return x == DType::BFloat16 && y == DType::Float32; };
  if (!autocast_on || !a.defined() || !b.defined()) return {a, b};
  if (mixed(a.dtype(), b.dtype())) return {to(a, DType::Float32), b};
  if (mixed(b.dtype(), a.dtype())) return {a, to(b, DType::Float32)};
  return {a, b};
}

bool add_in_float32(const Tensor& y, const Tensor& src,
                    const std::function<void(const Tensor& y32, const Tensor& src32)>& add) {
  if (y.dtype() != DType::BFloat16) return false;
  NoGradGuard no_grad;
  const Tensor y32 = to(y, DType::Float32);
  add(y32, to(src, DType::Float32));
  copy_(y, y32);
  return true;
}

}  // namespace tapestry
