/// @file
/// The CUDA backend's public controls: memory statistics of the caching allocator, its cache, and
/// the precision of float32 matrix products. Plain C++ (no CUDA types), available in every build;
/// without CUDA, or without a GPU, each function throws Error saying why (cuda::unavailable_reason()).
///
/// Every GPU has one Context (core/device.h): a non-default stream that all of Tapestry's work on it
/// is queued on, in order; a cuBLAS handle bound to that stream; and a caching allocator. Copies
/// between the host and a GPU wait for that stream, so values read on the host are always final.
#pragma once

#include "core/device.h"

namespace tapestry::cuda {

/// Statistics of cuda:index's caching allocator (core/caching_allocator.h): bytes in use by tensors,
/// the peak of that since the last reset, bytes reserved from the GPU (in use + cached), and the
/// number of cudaMalloc calls that succeeded.
MemoryStats memory_stats(int index = 0);
/// Starts a new peak: peak = in_use.
void reset_peak_memory(int index = 0);
/// Gives every cached (unused) block of cuda:index back to the GPU, after waiting for queued work.
void empty_cache(int index = 0);
/// Waits until the work queued on cuda:index has finished.
void synchronize(int index = 0);

/// How float32 matmuls run on a GPU: Full is IEEE float32 arithmetic (the default, and what the CPU
/// computes); TF32 lets cuBLAS use TensorFloat-32 tensor cores (Ampere and later), which round the
/// inputs to a 10-bit mantissa: several times faster, relative error around 1e-3. float64 matmuls
/// are unaffected.
enum class Float32Matmul { Full, TF32 };
/// Sets the float32 matmul mode of CUDA device `index`.
void set_float32_matmul(Float32Matmul mode, int index = 0);
/// The float32 matmul mode of CUDA device `index`.
Float32Matmul float32_matmul(int index = 0);

}  // namespace tapestry::cuda
