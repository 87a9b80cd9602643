/// @file
/// The device dispatch every op shares: its CUDA launcher when the tensor is on a GPU, else its CPU
/// kernel.
///
///   Tensor y = empty(x.shape(), x.options());
///   if (on_cuda("softmax", x, [&] { cuda::softmax_forward(...); })) return y;
///   ... the CPU kernel ...
///
/// The launchers' declarations (ops/cuda/*.h, plain C++) are visible in every build; their
/// definitions exist only in a build with CUDA. Without CUDA the call of `launch` below is a discarded
/// statement of a template, so it is never instantiated and the lambda's body, an inline function
/// nothing calls, is never emitted: the CPU-only library references no CUDA symbol, with no `#ifdef`
/// in the op. A helper that such a lambda calls, and that calls launchers itself, must be inline (or
/// a template) for the same reason: the compiler emits a non-inline function even when nothing calls
/// it (at -O0 it does), and then the linker needs the launchers.
#pragma once

#include <utility>

#include "core/tensor.h"
#include "ops/common.h"

namespace tapestry {

/// Whether this build has CUDA (TAPESTRY_HAS_CUDA is defined).
#ifdef TAPESTRY_HAS_CUDA
inline constexpr bool kHasCuda = true;
#else
inline constexpr bool kHasCuda = false;
#endif

/// x on a GPU: runs launch() and returns true. x on the CPU: returns false, for the op to run its CPU
/// kernel. Any other tensor (on a GPU, in a build without CUDA) is refused by check_cpu(op, x).
template <class Launch>
bool on_cuda(const char* op, const Tensor& x, Launch&& launch) {
  if constexpr (kHasCuda) {
    if (x.device().is_cuda()) {
      std::forward<Launch>(launch)();
      return true;
    }
  }
  check_cpu(op, x);
  return false;
}

}  // namespace tapestry
