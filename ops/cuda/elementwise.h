// CUDA launchers of the elementwise ops (ops/cuda/elementwise.cu, ops/cuda/copy.cu). Plain C++:
// ops/elementwise.cpp calls them for tensors on a GPU. Each takes its output, allocated by the
// caller on the inputs' device, and the functor of ops/elementwise_math.h that the CPU evaluates
// too; each is instantiated in the .cu for the functors and dtypes the CPU op accepts, and throws
// Error (naming `op`) for any other dtype. Kernels are queued on the device's stream.
#pragma once

#include "core/tensor.h"

namespace tapestry::cuda {

// y = f.forward(x)
template <class F>
void unary_forward(const char* op, const F& f, const Tensor& y, const Tensor& x);
// dx = f.backward(dy, x, y)
template <class F>
void unary_backward(const char* op, const F& f, const Tensor& dx, const Tensor& dy, const Tensor& x,
                    const Tensor& y);
// y = f.forward(a, b), a and b broadcast to y
template <class F>
void binary_forward(const char* op, const F& f, const Tensor& y, const Tensor& a, const Tensor& b);
// grad = f.grad_a(dy, a, b, y) or f.grad_b(dy, a, b, y), at y's (the broadcast) shape
enum class Operand { A, B };
template <class F>
void binary_backward(const char* op, const F& f, Operand side, const Tensor& grad, const Tensor& dy,
                     const Tensor& a, const Tensor& b, const Tensor& y);
// y = f(a, b) into a bool tensor (comparisons, logical and / or)
template <class F>
void compare(const char* op, const F& f, const Tensor& y, const Tensor& a, const Tensor& b);

// y = cond ? a : b
void where(const Tensor& y, const Tensor& cond, const Tensor& a, const Tensor& b);

// In place, on a (possibly strided) self whose elements do not overlap; src must not share memory
// with self unless it is self.
void add_(const Tensor& self, const Tensor& other);  // self += other (broadcast)
void mul_(const Tensor& self, double factor);
void fill_(const Tensor& self, double value);
// self = src converted to self's dtype, src broadcast to self's shape; both on self's device.
void copy_(const Tensor& self, const Tensor& src);

}  // namespace tapestry::cuda
