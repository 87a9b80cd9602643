/// @file
/// Calling a generic lambda with the C++ type of a runtime DType.
///
///   visit_floating(x.dtype(), "exp", [&](auto tag) { using T = decltype(tag); ... });
///
/// The lambda receives a value-initialised T; only its type matters. Each visitor throws an Error
/// naming the op when the dtype is not one it accepts.
#pragma once

#include <cstdint>

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
    default: fail(op, "expected a floating tensor (float32 or float64), got ", dtype);
  }
}

/// float32, float64, int32, int64: the types arithmetic is defined on.
template <class F>
decltype(auto) visit_numeric(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    default: fail(op, "expected a numeric tensor, got ", dtype);
  }
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
  }
  return f(float{});
}

}  // namespace tapestry
