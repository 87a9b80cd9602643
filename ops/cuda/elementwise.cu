// CUDA kernels of the elementwise ops: the functors of ops/elementwise_math.h mapped over strided,
// broadcast operands (ops/cuda/map.cuh). Instantiated per functor for the dtypes the CPU op accepts:
// float32 / float64 for the math, int32 / int64 too where the CPU op allows integers (add, sub, mul,
// div, maximum, minimum, and neg / abs forward); bfloat16 for all of them, computed in float32.
#include "ops/cuda/elementwise.h"

#include "core/dispatch.h"
#include "ops/cuda/map.cuh"
#include "ops/elementwise_math.h"

namespace tapestry::cuda {

namespace {

// Functors whose forward the CPU also evaluates on integers (the rest are floating only).
template <class F> constexpr bool kNumeric = false;
template <> constexpr bool kNumeric<math::Neg> = true;
template <> constexpr bool kNumeric<math::Abs> = true;
template <> constexpr bool kNumeric<math::Add> = true;
template <> constexpr bool kNumeric<math::Sub> = true;
template <> constexpr bool kNumeric<math::Mul> = true;
template <> constexpr bool kNumeric<math::Div> = true;
template <> constexpr bool kNumeric<math::Maximum> = true;
template <> constexpr bool kNumeric<math::Minimum> = true;

template <class F, class Run>
void visit_domain(DType dtype, const char* op, Run&& run) {
  if constexpr (kNumeric<F>) visit_numeric_or_bfloat16(dtype, op, run);
  else visit_floating_or_bfloat16(dtype, op, run);
}

// The kernels' view of a functor: a plain call operator per method, computing in compute_t<T>
// (float for bfloat16) and rounding the result back to T.
template <class F>
struct Forward {
  F f;
  template <class T> __device__ T operator()(T x) const { return T(f.forward(compute_t<T>(x))); }
  template <class T> __device__ T operator()(T a, T b) const {
    return T(f.forward(compute_t<T>(a), compute_t<T>(b)));
  }
};
template <class F>
struct Backward {
  F f;
  template <class T> __device__ T operator()(T dy, T x, T y) const {
    using C = compute_t<T>;
    return T(f.backward(C(dy), C(x), C(y)));
  }
};
template <class F>
struct GradA {
  F f;
  template <class T> __device__ T operator()(T dy, T a, T b, T y) const {
    using C = compute_t<T>;
    return T(f.grad_a(C(dy), C(a), C(b), C(y)));
  }
};
template <class F>
struct GradB {
  F f;
  template <class T> __device__ T operator()(T dy, T a, T b, T y) const {
    using C = compute_t<T>;
    return T(f.grad_b(C(dy), C(a), C(b), C(y)));
  }
};

struct Select {
  template <class T> __device__ T operator()(bool c, T a, T b) const { return c ? a : b; }
};

template <class T>
struct Scale {
  compute_t<T> factor;
  __device__ T operator()(T x) const { return T(compute_t<T>(x) * factor); }
};

}  // namespace

template <class F>
void unary_forward(const char* op, const F& f, const Tensor& y, const Tensor& x) {
  visit_domain<F>(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    gpu_map<T, T>(op, y, Forward<F>{f}, x);
  });
}

template <class F>
void unary_backward(const char* op, const F& f, const Tensor& dx, const Tensor& dy, const Tensor& x,
                    const Tensor& y) {
  visit_floating_or_bfloat16(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    gpu_map<T, T, T, T>(op, dx, Backward<F>{f}, dy, x, y);
  });
}

template <class F>
void binary_forward(const char* op, const F& f, const Tensor& y, const Tensor& a, const Tensor& b) {
  visit_domain<F>(a.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    gpu_map<T, T, T>(op, y, Forward<F>{f}, a, b);
  });
}

template <class F>
void binary_backward(const char* op, const F& f, Operand side, const Tensor& grad, const Tensor& dy,
                     const Tensor& a, const Tensor& b, const Tensor& y) {
  visit_floating_or_bfloat16(y.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    if (side == Operand::A) gpu_map<T, T, T, T, T>(op, grad, GradA<F>{f}, dy, a, b, y);
    else gpu_map<T, T, T, T, T>(op, grad, GradB<F>{f}, dy, a, b, y);
  });
}

template <class F>
void compare(const char* op, const F& f, const Tensor& y, const Tensor& a, const Tensor& b) {
  if constexpr (std::is_same_v<F, math::And> || std::is_same_v<F, math::Or>) {
    TP_CHECK(a.dtype() == DType::Bool, op, "expected bool tensors, got ", a.dtype());
    gpu_map<bool, bool, bool>(op, y, f, a, b);
  } else {
    visit_all(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      gpu_map<bool, T, T>(op, y, f, a, b);
    });
  }
}

void where(const Tensor& y, const Tensor& cond, const Tensor& a, const Tensor& b) {
  visit_all(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    gpu_map<T, bool, T, T>("where", y, Select{}, cond, a, b);
  });
}

void add_(const Tensor& self, const Tensor& other) {
  visit_numeric_or_bfloat16(self.dtype(), "add_", [&](auto tag) {
    using T = decltype(tag);
    gpu_map<T, T, T>("add_", self, Forward<math::Add>{}, self, other);
  });
}

void mul_(const Tensor& self, double factor) {
  visit_numeric_or_bfloat16(self.dtype(), "mul_", [&](auto tag) {
    using T = decltype(tag);
    gpu_map<T, T>("mul_", self, Scale<T>{static_cast<compute_t<T>>(factor)}, self);
  });
}

#define TP_UNARY(F)                                                                                  \
  template void unary_forward<F>(const char*, const F&, const Tensor&, const Tensor&);              \
  template void unary_backward<F>(const char*, const F&, const Tensor&, const Tensor&, const Tensor&, \
                                  const Tensor&);
TP_UNARY(math::Neg)
TP_UNARY(math::Abs)
TP_UNARY(math::Exp)
TP_UNARY(math::Log)
TP_UNARY(math::Sqrt)
TP_UNARY(math::Rsqrt)
TP_UNARY(math::Tanh)
TP_UNARY(math::Sigmoid)
TP_UNARY(math::Relu)
TP_UNARY(math::Gelu)
TP_UNARY(math::PowScalar)
TP_UNARY(math::Clamp)
TP_UNARY(math::Log1p)
TP_UNARY(math::Expm1)
TP_UNARY(math::Sin)
TP_UNARY(math::Cos)
TP_UNARY(math::Silu)
TP_UNARY(math::LeakyRelu)
TP_UNARY(math::Softplus)
#undef TP_UNARY

#define TP_BINARY(F)                                                                                  \
  template void binary_forward<F>(const char*, const F&, const Tensor&, const Tensor&, const Tensor&); \
  template void binary_backward<F>(const char*, const F&, Operand, const Tensor&, const Tensor&,       \
                                   const Tensor&, const Tensor&, const Tensor&);
TP_BINARY(math::Add)
TP_BINARY(math::Sub)
TP_BINARY(math::Mul)
TP_BINARY(math::Div)
TP_BINARY(math::Pow)
TP_BINARY(math::Maximum)
TP_BINARY(math::Minimum)
#undef TP_BINARY

#define TP_COMPARE(F) \
  template void compare<F>(const char*, const F&, const Tensor&, const Tensor&, const Tensor&);
TP_COMPARE(math::Eq)
TP_COMPARE(math::Ne)
TP_COMPARE(math::Lt)
TP_COMPARE(math::Le)
TP_COMPARE(math::Gt)
TP_COMPARE(math::Ge)
TP_COMPARE(math::And)
TP_COMPARE(math::Or)
#undef TP_COMPARE

}  // namespace tapestry::cuda
