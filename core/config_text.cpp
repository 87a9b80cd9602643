#include "core/config_text.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace tapestry {

ConfigText split_config(const std::string& text, const std::string& op) {
  ConfigText config;
  const size_t colon = text.find(':');
  config.type = text.substr(0, colon);
  TP_CHECK(!config.type.empty(), op, "expected a type name before the settings, got '", text, "'");
  if (colon == std::string::npos) return config;
  // Every item is key=value: "full:", "clustered:clusters=5," and "a:b=1,,c=2" hold an empty one.
  const std::string rest = text.substr(colon + 1) + ",";
  for (size_t begin = 0, end; begin < rest.size(); begin = end + 1) {
    end = rest.find(',', begin);
    const std::string item = rest.substr(begin, end - begin);
    const size_t eq = item.find('=');
    TP_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < item.size(), op, "expected key=value, got '", item, "'");
    std::string key = item.substr(0, eq);
    TP_CHECK(std::none_of(config.items.begin(), config.items.end(), [&](const auto& kv) { return kv.first == key; }),
             op, "'", key, "' is given twice");
    config.items.emplace_back(std::move(key), item.substr(eq + 1));
  }
  return config;
}

double parse_config_number(const std::string& value, const std::string& op, const std::string& key) {
  const char* begin = value.c_str();
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(begin, &end);
  TP_CHECK(!value.empty() && end == begin + value.size() && errno == 0 && std::isfinite(x), op, key,
           " must be a finite number, got '", value, "'");
  return x;
}

std::string format_config_number(double value) {
  char buffer[32];
  if (value == std::floor(value) && std::abs(value) < 1e15) {  // whole numbers as such: 4000, not 4e+03
    std::snprintf(buffer, sizeof buffer, "%.0f", value);
    return buffer;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof buffer, "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

}  // namespace tapestry
