/// @file
/// Calling a generic lambda with the C++ type of a runtime DType.
///
///   visit_floating(x.dtype(), "exp", [&](auto tag) { using T = decltype(tag); ... });
///
/// The lambda receives a value-initialised T; only its type matters. Each visitor throws an Error
/// naming the op when the dtype is not one it accepts.
#pragma once

#include <cstdint>
#include <utility>

#include "core/dtype.h"
#include "core/error.h"

namespace tapestry {

template <class F>
/// Calls f(T{}) with the C++ type T of a floating dtype (float32, float64); throws Error from `op`
/// for any other.
decltype(auto) visit_floating(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::BFloat16: fail(op, "has no bfloat16 kernel: convert the tensor with to(x, DType::Float32)");
    default: fail(op, "expected a floating tensor (float32 or float64), got ", dtype);
  }
}

/// visit_floating, and bfloat16 too: for kernels that compute in compute_t<T> (float for bfloat16,
/// core/bfloat16.h) and round each result back to T.
template <class F>
decltype(auto) visit_floating_or_bfloat16(DType dtype, const char* op, F&& f) {
  if (dtype == DType::BFloat16) return f(bfloat16{});
  return visit_floating(dtype, op, std::forward<F>(f));
}

/// float32, float64, int32, int64: the types arithmetic is defined on.
template <class F>
decltype(auto) visit_numeric(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::BFloat16: fail(op, "has no bfloat16 kernel: convert the tensor with to(x, DType::Float32)");
    default: fail(op, "expected a numeric tensor, got ", dtype);
  }
}

/// visit_numeric, and bfloat16 too (as visit_floating_or_bfloat16).
template <class F>
decltype(auto) visit_numeric_or_bfloat16(DType dtype, const char* op, F&& f) {
  if (dtype == DType::BFloat16) return f(bfloat16{});
  return visit_numeric(dtype, op, std::forward<F>(f));
}

template <class F>
/// Calls f(T{}) with the C++ type T of an index dtype (int32, int64); throws Error from `op` for
/// any other.
decltype(auto) visit_index(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    default: fail(op, "expected an index tensor (int32 or int64), got ", dtype);
  }
}

template <class F>
/// Calls f(T{}) with the C++ type T of any dtype.
decltype(auto) visit_all(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::Bool: return f(bool{});
    case DType::BFloat16: return f(bfloat16{});
  }
  return f(float{});
}

}  // namespace tapestry
