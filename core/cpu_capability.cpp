// CPU capability detection and choice (core/cpu_capability.h).
#include "core/cpu_capability.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace tapestry {

namespace {

constexpr CpuCapability kAll[] = {CpuCapability::Baseline, CpuCapability::Avx2, CpuCapability::Avx512};

CpuCapability detect() {
#if TP_CPU_DISPATCH
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return CpuCapability::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuCapability::Avx2;
#endif
  return CpuCapability::Baseline;
}

CpuCapability checked(CpuCapability wanted, const char* from) {
  const CpuCapability supported = cpu_capability_supported();
  TP_CHECK(wanted <= supported, from, "this CPU has ", to_string(supported), ", not ", to_string(wanted));
  return wanted;
}

// The environment's choice, or the supported capability when the variable is unset.
CpuCapability from_environment() {
  const char* text = std::getenv("TAPESTRY_CPU_CAPABILITY");
  if (!text || !*text) return cpu_capability_supported();
  for (const CpuCapability c : kAll)
    if (std::strcmp(text, to_string(c)) == 0) return checked(c, "TAPESTRY_CPU_CAPABILITY");
  fail("TAPESTRY_CPU_CAPABILITY", "expected baseline, avx2 or avx512, got '", text, "'");
}

std::atomic<int> forced{-1};  // a CpuCapabilityScope's choice, or -1

}  // namespace

const char* to_string(CpuCapability capability) {
  switch (capability) {
    case CpuCapability::Baseline: return "baseline";
    case CpuCapability::Avx2: return "avx2";
    case CpuCapability::Avx512: return "avx512";
  }
  return "unknown";
}

CpuCapability cpu_capability_supported() {
  static const CpuCapability supported = detect();
  return supported;
}

CpuCapability cpu_capability() {
  const int scoped = forced.load(std::memory_order_relaxed);
  if (scoped >= 0) return static_cast<CpuCapability>(scoped);
  static const CpuCapability chosen = from_environment();
  return chosen;
}

CpuCapabilityScope::CpuCapabilityScope(CpuCapability capability) : previous_(cpu_capability()) {
  forced.store(static_cast<int>(checked(capability, "CpuCapabilityScope")), std::memory_order_relaxed);
}

CpuCapabilityScope::~CpuCapabilityScope() { forced.store(static_cast<int>(previous_), std::memory_order_relaxed); }

}  // namespace tapestry
