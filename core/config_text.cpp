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

ConfigKey number_key(std::string key, double fallback, double min, double max, Ends ends, std::string help) {
  return {std::move(key), fallback, min, max, std::move(help), {}, KeyType::Number, ends};
}

std::string join_names(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out.empty() ? "none" : out;
}

int64_t find_config_key(const std::vector<ConfigKey>& keys, const std::string& key) {
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i].key == key) return int64_t(i);
  return -1;
}

namespace {

bool low_open(const ConfigKey& k) { return k.ends == Ends::LowOpen || k.ends == Ends::Open; }
bool high_open(const ConfigKey& k) { return k.ends == Ends::HighOpen || k.ends == Ends::Open; }

}  // namespace

std::string config_range(const ConfigKey& k) {
  if (!k.names.empty()) return join_names(k.names);
  const std::string high = std::isinf(k.max) ? "inf" : format_config_number(k.max);
  return (low_open(k) ? "(" : "[") + format_config_number(k.min) + ", " + high +
         (high_open(k) || std::isinf(k.max) ? ")" : "]");
}

std::string config_value_text(const ConfigKey& k, double value) {
  return k.names.empty() ? format_config_number(value) : k.names[size_t(value)];
}

namespace {

// "in [1, 65536]", "one of projected, printed, cosine": what a message says the key must be.
std::string allowed(const ConfigKey& k) { return (k.names.empty() ? "in " : "one of ") + config_range(k); }

// The value `text` gives key k (before its range check); throws Error naming `op`.
double read_value(const ConfigKey& k, const std::string& text, const std::string& op) {
  if (!k.names.empty()) {
    const auto it = std::find(k.names.begin(), k.names.end(), text);
    TP_CHECK(it != k.names.end(), op, k.key, " must be ", allowed(k), ", got '", text, "'");
    return double(it - k.names.begin());
  }
  if (k.type == KeyType::Number) return parse_config_number(text, op, k.key);
  // Whole numbers in decimal notation ("4000", "4e3"): a config text recorded with either reads
  // back; no spaces, hexadecimal or "inf".
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(begin, &end);
  const bool decimal = text.find_first_not_of("0123456789.eE+-") == std::string::npos;
  TP_CHECK(!text.empty() && decimal && end == begin + text.size() && errno == 0 && std::isfinite(x) &&
               x == std::floor(x) && (x >= 0 || k.min < 0),
           op, k.key, k.min < 0 ? " must be an integer" : " must be a non-negative integer", ", got '", text, "'");
  return x;
}

}  // namespace

void check_config_value(const ConfigKey& k, double value, const std::string& op) {
  const double min = k.names.empty() ? k.min : 0, max = k.names.empty() ? k.max : double(k.names.size()) - 1;
  const bool whole = value == std::floor(value);
  const bool inside = (low_open(k) ? value > min : value >= min) && (high_open(k) ? value < max : value <= max);
  // Upper bounds keep a typo from hanging a run (iterations=999999999 ran Lloyd for hours).
  TP_CHECK(std::isfinite(value) && inside && (whole || (k.type == KeyType::Number && k.names.empty())), op, k.key,
           " must be ", allowed(k), ", got ", format_config_number(value));
}

std::vector<double> parse_config_values(const std::vector<ConfigKey>& keys, const ConfigText& config,
                                        const std::string& op) {
  std::vector<double> values;
  for (const ConfigKey& k : keys) values.push_back(k.fallback);
  for (const auto& [key, text] : config.items) {
    const int64_t i = find_config_key(keys, key);
    if (i < 0) {
      std::vector<std::string> names;
      for (const ConfigKey& k : keys) names.push_back(k.key);
      fail(op, "'", key, "' is not a setting of ", config.type, " (settings: ", join_names(names), ")");
    }
    values[size_t(i)] = read_value(keys[size_t(i)], text, op);
    check_config_value(keys[size_t(i)], values[size_t(i)], op);
  }
  return values;
}

std::string print_config(const std::string& type, const std::vector<ConfigKey>& keys, const std::vector<double>& values,
                        bool (*shown)(const ConfigKey& key, double value)) {
  std::string out = type;
  bool first = true;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (shown && !shown(keys[i], values[i])) continue;
    out += (first ? ":" : ",") + keys[i].key + "=" + config_value_text(keys[i], values[i]);
    first = false;
  }
  return out;
}

std::string config_defaults(const std::vector<ConfigKey>& keys) {
  std::string out;
  for (const ConfigKey& k : keys) out += (out.empty() ? "" : ",") + k.key + "=" + config_value_text(k, k.fallback);
  return out;
}

std::string config_keys_help(const std::vector<ConfigKey>& keys, const std::string& indent) {
  std::string out;
  for (const ConfigKey& k : keys)
    out += indent + k.key + "=" + config_value_text(k, k.fallback) + "  (" + config_range(k) + ") " + k.help + "\n";
  return out;
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
