// libFuzzer target: the config-string parsers (attention, optimizer, schedule, parameter groups). The
// first byte picks the parser, the rest is the text; a config that parses must print and parse back to
// itself.
// Seeds: tests/fuzz/corpus/configs/.
#include <cstdlib>

#include "nn/attention/config.h"
#include "optim/config.h"
#include "optim/param_groups.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  tapestry::fuzz::refusing([&] {
    switch (data[0] % 4) {
      case 0: {
        const auto c = tapestry::attention::AttentionConfig::parse(text);
        if (!(tapestry::attention::AttentionConfig::parse(c.to_string()) == c)) std::abort();
        break;
      }
      case 1:
        (void)tapestry::optim::OptimizerConfig::parse(text);
        break;
      case 2:
        (void)tapestry::optim::ScheduleConfig::parse(text);
        break;
      default: {
        const auto c = tapestry::optim::ParamGroupsConfig::parse(text);
        if (!(tapestry::optim::ParamGroupsConfig::parse(c.to_string()) == c)) std::abort();
        break;
      }
    }
  });
  return 0;
}
