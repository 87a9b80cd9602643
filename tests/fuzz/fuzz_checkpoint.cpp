// libFuzzer target: load_checkpoint on arbitrary bytes. Seeds: tests/fuzz/corpus/checkpoint/.
#include <sstream>

#include "core/checkpoint.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = tapestry::fuzz::write_file("input.ckpt", data, size);
  tapestry::fuzz::refusing([&] {
    const tapestry::Checkpoint checkpoint = tapestry::load_checkpoint(path);
    // What loaded must be usable: read every tensor's values.
    std::ostringstream out;
    for (const auto& entry : checkpoint.tensors) out << entry.second;
  });
  return 0;
}
