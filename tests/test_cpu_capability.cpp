// The choice of vector instructions for the kernels compiled per capability (core/cpu_capability.h).
#include "tests/testing.h"

#include "core/cpu_capability.h"

using namespace tapestry;

TEST_CASE("CPU capabilities: names, the supported one, and a scope that lowers and restores the choice") {
  CHECK(std::string(to_string(CpuCapability::Baseline)) == "baseline");
  CHECK(std::string(to_string(CpuCapability::Avx2)) == "avx2");
  CHECK(std::string(to_string(CpuCapability::Avx512)) == "avx512");
  const CpuCapability before = cpu_capability();
  CHECK(before <= cpu_capability_supported());
  {
    CpuCapabilityScope scope(CpuCapability::Baseline);
    CHECK(cpu_capability() == CpuCapability::Baseline);
    {
      CpuCapabilityScope inner(cpu_capability_supported());
      CHECK(cpu_capability() == cpu_capability_supported());
    }
    CHECK(cpu_capability() == CpuCapability::Baseline);
  }
  CHECK(cpu_capability() == before);
  // More than the CPU has is refused, naming what it has.
  if (cpu_capability_supported() < CpuCapability::Avx512) {
    const std::string message = std::string("this CPU has ") + to_string(cpu_capability_supported());
    const auto ask_avx512 = [] { CpuCapabilityScope scope(CpuCapability::Avx512); };
    CHECK_THROWS_WITH_AS(ask_avx512(), doctest::Contains(message.c_str()), Error);
    CHECK(cpu_capability() == before);
  }
}
