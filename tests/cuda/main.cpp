// The CUDA parity suite (DESIGN §7): every op with a CUDA kernel, forward and backward, against the
// CPU on the same inputs. Without a GPU it prints one line saying why it was skipped and passes; the
// check runs here, before doctest, so no test (and no doctest decorator) touches CUDA without a GPU.
//
// --cpu-stand-in runs the suite with the CPU standing in for the GPU: every comparison pits the CPU
// against itself, which exercises the suite's own logic (inputs, views, tolerances, expected errors)
// on a machine without a GPU. Tests that only mean something on a GPU (allocator statistics, out of
// memory, TF32) say they were skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <iostream>
#include <string>
#include <vector>

#include "tests/cuda/parity.h"

int main(int argc, char** argv) {
  using namespace tapestry;
  std::vector<char*> args;
  bool cpu_stand_in = false;
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--cpu-stand-in") cpu_stand_in = true;
    else args.push_back(argv[i]);
  }
  if (!cpu_stand_in && !cuda::is_available()) {
    std::cout << "CUDA parity suite skipped: " << cuda::unavailable_reason() << std::endl;
    return 0;
  }
  testing::device_under_test() = cpu_stand_in ? Device::cpu() : Device::cuda(0);
  doctest::Context context(static_cast<int>(args.size()), args.data());
  return context.run();
}
