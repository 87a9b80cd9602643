/// @file
/// Which vector instructions Tapestry's own CPU kernels use. The library is compiled for the x86-64
/// baseline (SSE2), so that one binary runs on every x86-64 CPU; the few kernels where vector width
/// decides the time (fused attention's softmax tiles, ops/attention.cpp, and its tile products,
/// ops/tile_gemm.cpp; dropout's Philox draws, ops/dropout.cpp) are compiled again for AVX2 and AVX-512
/// and the widest the CPU has is chosen when they run. Every capability gives the same bits, but for
/// fused attention at the baseline: those kernels contract no multiply-add into a fused one unless
/// they write it out (fused attention's tile products and exponentials, in AVX2 and AVX-512 alike),
/// and sum in a fixed order, so a result does not depend on the CPU it was computed on (OpenBLAS's
/// own kernels aside, which OPENBLAS_CORETYPE pins). The baseline has no fused multiply-add
/// instruction: there fused attention rounds its exponentials' multiply-adds and runs its tile
/// products on BLAS (ops/tile_gemm.h).
///
/// The environment variable TAPESTRY_CPU_CAPABILITY=baseline|avx2|avx512 lowers the choice (to compare
/// them, or to rule one out); asking for more than the CPU has is an error naming what it has.
#pragma once

#include <string>

namespace tapestry {

/// A level of x86-64 vector instructions, each containing the one before.
enum class CpuCapability { Baseline, Avx2, Avx512 };

/// "baseline", "avx2" or "avx512".
const char* to_string(CpuCapability capability);

/// The widest capability this CPU has (AVX2 with FMA; AVX-512 F, BW, DQ and VL); Baseline on other
/// architectures.
CpuCapability cpu_capability_supported();

/// The capability the kernels use now: the supported one, lowered by TAPESTRY_CPU_CAPABILITY (read
/// once) or by a CpuCapabilityScope. Throws if the variable names an unknown or unsupported one.
CpuCapability cpu_capability();

/// Makes the kernels use `capability` while it lives (tests compare the capabilities' results).
/// Throws if the CPU lacks it. Not for use while other threads run kernels.
class CpuCapabilityScope {
 public:
  /// Chooses `capability` (at most cpu_capability_supported()).
  explicit CpuCapabilityScope(CpuCapability capability);
  /// Restores the choice before this scope.
  ~CpuCapabilityScope();
  CpuCapabilityScope(const CpuCapabilityScope&) = delete;
  CpuCapabilityScope& operator=(const CpuCapabilityScope&) = delete;

 private:
  CpuCapability previous_;
};

}  // namespace tapestry

/// Compiles a function for AVX2 + FMA (TP_TARGET_AVX2) or AVX-512 (TP_TARGET_AVX512) on x86-64, where
/// TP_CPU_DISPATCH is 1; a kernel written once as an inline function is instantiated under each.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TP_CPU_DISPATCH 1
#define TP_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define TP_TARGET_AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl")))
#else
#define TP_CPU_DISPATCH 0
#endif
