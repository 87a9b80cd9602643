/// @file
/// Element types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

#include "core/bfloat16.h"

namespace tapestry {

/// The element types of tensors.
enum class DType { Float32, Float64, Int32, Int64, Bool, BFloat16 };

/// Bytes per element.
std::size_t element_size(DType dtype);
const char* dtype_name(DType dtype);  ///< "float32", ...
/// float32, float64 or bfloat16 (core/bfloat16.h: stored in 16 bits, computed in float32)
inline bool is_floating(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::BFloat16;
}
/// int32 or int64
inline bool is_integer(DType dtype) { return dtype == DType::Int32 || dtype == DType::Int64; }
/// Prints dtype_name.
inline std::ostream& operator<<(std::ostream& out, DType dtype) { return out << dtype_name(dtype); }

///@{
/// The DType of a C++ element type: dtype_of<float>() == DType::Float32.
template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::Int32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }
template <> constexpr DType dtype_of<bool>() { return DType::Bool; }
template <> constexpr DType dtype_of<bfloat16>() { return DType::BFloat16; }
///@}

}  // namespace tapestry
