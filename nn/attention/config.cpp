#include "nn/attention/config.h"

#include <algorithm>

#include "core/config_text.h"

namespace tapestry::attention {

// Every kind, in the order --help lists them; each is defined in nn/attention/kinds/<name>.cpp.
const Kind& full_kind();
const Kind& clustered_kind();
const Kind& improved_clustered_kind();
const Kind& neural_clustering_kind();
const Kind& oracle_top_kind();
const Kind& routing_kind();
const Kind& reformer_kind();
const Kind& local_kind();

const std::vector<const Kind*>& kinds() {
  static const std::vector<const Kind*> all{&full_kind(),       &clustered_kind(), &improved_clustered_kind(),
                                            &neural_clustering_kind(), &oracle_top_kind(), &routing_kind(),
                                            &reformer_kind(),   &local_kind()};
  return all;
}

namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out.empty() ? "none" : out;
}

// The index of `key` among the kind's settings, or -1.
int64_t find_setting(const std::vector<Setting>& settings, const std::string& key) {
  for (size_t i = 0; i < settings.size(); ++i)
    if (settings[i].key == key) return int64_t(i);
  return -1;
}

std::string value_text(const Setting& s, int64_t value) {
  return s.names.empty() ? std::to_string(value) : s.names[size_t(value)];
}

std::string range_text(const Setting& s) {
  if (!s.names.empty()) return join(s.names);
  return "[" + std::to_string(s.min) + ", " + std::to_string(s.max) + "]";
}

// The value `text` gives setting s; throws Error naming `op`.
int64_t read_value(const Setting& s, const std::string& text, const std::string& op) {
  if (!s.names.empty()) {
    const auto it = std::find(s.names.begin(), s.names.end(), text);
    TP_CHECK(it != s.names.end(), op, s.key, " must be one of ", join(s.names), ", got '", text, "'");
    return int64_t(it - s.names.begin());
  }
  TP_CHECK(text.size() < 10 && !text.empty() && text.find_first_not_of("0123456789") == std::string::npos, op,
           s.key, " must be a non-negative integer, got '", text, "'");
  const int64_t value = std::stoll(text);
  // Upper bounds keep a typo from hanging a run (iterations=999999999 ran Lloyd for hours); they are
  // far above what the papers use (C ≤ 200, L = 10, k ≤ 128).
  TP_CHECK(value >= s.min && value <= s.max, op, s.key, " must be in ", range_text(s), ", got ", value);
  return value;
}

}  // namespace

AttentionConfig::AttentionConfig() : kind_(&full_kind()) {
  for (const Setting& s : kind_->settings()) values_.push_back(s.fallback);
}

AttentionConfig AttentionConfig::parse(const std::string& text) {
  const std::string op = "attention config '" + text + "'";
  const ConfigText items = split_config(text, op);
  AttentionConfig config;
  config.kind_ = nullptr;
  for (const Kind* k : kinds())
    if (items.type == k->name()) config.kind_ = k;
  if (!config.kind_) {
    std::vector<std::string> names;
    for (const Kind* k : kinds()) names.push_back(k->name());
    fail(op, "unknown attention type '", items.type, "' (known: ", join(names), ")");
  }
  const std::vector<Setting> settings = config.kind_->settings();
  config.values_.clear();
  for (const Setting& s : settings) config.values_.push_back(s.fallback);
  for (const auto& [key, value] : items.items) {
    const int64_t i = find_setting(settings, key);
    if (i < 0) {
      std::vector<std::string> keys;
      for (const Setting& s : settings) keys.push_back(s.key);
      fail(op, "'", key, "' is not a setting of ", config.name(), " (settings: ", join(keys), ")");
    }
    config.values_[size_t(i)] = read_value(settings[size_t(i)], value, op);
  }
  return config;
}

std::string AttentionConfig::to_string() const {
  std::string out = name();
  bool first = true;
  const std::vector<Setting> settings = kind_->settings();
  for (size_t i = 0; i < settings.size(); ++i) {
    // A flag (a 0/1 key: shared-qk, fused) is printed only when it is not its default.
    const bool flag = settings[i].min == 0 && settings[i].max == 1 && settings[i].names.empty();
    if (flag && values_[i] == settings[i].fallback) continue;
    out += (first ? ":" : ",") + settings[i].key + "=" + value_text(settings[i], values_[i]);
    first = false;
  }
  return out;
}

bool AttentionConfig::operator==(const AttentionConfig& other) const {
  return kind_ == other.kind_ && values_ == other.values_;
}

const std::string& AttentionConfig::name() const {
  static const std::map<const Kind*, std::string> names = [] {
    std::map<const Kind*, std::string> out;
    for (const Kind* k : kinds()) out[k] = k->name();
    return out;
  }();
  return names.at(kind_);
}

bool AttentionConfig::has(const std::string& key) const { return find_setting(kind_->settings(), key) >= 0; }

int64_t AttentionConfig::get(const std::string& key) const {
  const int64_t i = find_setting(kind_->settings(), key);
  TP_CHECK(i >= 0, "AttentionConfig", name(), " attention has no setting '", key, "'");
  return values_[size_t(i)];
}

AttentionConfig AttentionConfig::with(const std::string& key, int64_t value) const {
  const std::vector<Setting> settings = kind_->settings();
  const int64_t i = find_setting(settings, key);
  TP_CHECK(i >= 0, "AttentionConfig", name(), " attention has no setting '", key, "'");
  const Setting& s = settings[size_t(i)];
  const int64_t max = s.names.empty() ? s.max : int64_t(s.names.size()) - 1;
  TP_CHECK(value >= (s.names.empty() ? s.min : 0) && value <= max, "AttentionConfig", key, " must be in ",
           range_text(s), ", got ", value);
  AttentionConfig out = *this;
  out.values_[size_t(i)] = value;
  return out;
}

std::string kind_names(bool (*keep)(const Kind&)) {
  std::vector<std::string> names;
  for (const Kind* k : kinds())
    if (keep(*k)) names.push_back(k->name());
  return join(names);
}

std::string kinds_help() {
  std::string out;
  for (const Kind* k : kinds()) {
    std::string settings;
    for (const Setting& s : k->settings())
      settings += (settings.empty() ? "" : ",") + s.key + "=" + value_text(s, s.fallback);
    out += (out.empty() ? "" : "; ") + k->name() + (settings.empty() ? "" : ":" + settings);
  }
  return out;
}

std::string describe_kinds() {
  std::string out;
  for (const Kind* k : kinds()) {
    out += k->name() + ": " + k->summary() + "\n  causal form: " + (k->has_causal_form() ? "yes" : "no") + "\n";
    for (const Setting& s : k->settings())
      out += "  " + s.key + "=" + value_text(s, s.fallback) + "  (" + range_text(s) + ") " + s.help + "\n";
  }
  return out;
}

std::string with_legacy_defaults(const std::string& text) {
  ConfigText items;
  try {
    items = split_config(text, "attention config");
  } catch (const Error&) {
    return text;  // not a config: the caller's own check reports it
  }
  if (items.type != neural_clustering_kind().name()) return text;
  const auto given = [&](const char* key) {
    return std::any_of(items.items.begin(), items.items.end(), [&](const auto& item) { return item.first == key; });
  };
  std::string out = text;
  const auto append = [&](const std::string& item) { out += (out.find(':') == std::string::npos ? ":" : ",") + item; };
  if (!given("clusters")) append("clusters=" + std::to_string(kLegacyNeuralClusteringClusters));
  if (!given("losses")) append(std::string("losses=") + kLegacyClusteringLosses);
  return out;
}

bool shares_qk(const AttentionConfig& config) { return config.kind().shares_qk(config); }

Tensor attend(const AttentionConfig& config, const Tensor& q, const Tensor& k, const Tensor& v,
              const Padding& padding, Causal causal, Generator& gen, const State& state) {
  return config.kind().attend(config, q, shares_qk(config) ? unit_rows(k) : k, v, padding, causal, gen, state);
}

}  // namespace tapestry::attention
