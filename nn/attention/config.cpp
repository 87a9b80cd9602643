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

std::vector<std::string> kind_list() {
  std::vector<std::string> names;
  for (const Kind* k : kinds()) names.push_back(k->name());
  return names;
}

// A flag (a 0/1 key: shared-qk, fused) is printed only when it is not its default, so that plain full
// attention stays "full".
bool printed(const Setting& s, double value) {
  const bool flag = s.min == 0 && s.max == 1 && s.names.empty();
  return !flag || value != s.fallback;
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
  TP_CHECK(config.kind_, op, "unknown attention type '", items.type, "' (known: ", join_names(kind_list()), ")");
  config.values_ = parse_config_values(config.kind_->settings(), items, op);
  return config;
}

std::string AttentionConfig::to_string() const { return print_config(name(), kind_->settings(), values_, printed); }

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

bool AttentionConfig::has(const std::string& key) const { return find_config_key(kind_->settings(), key) >= 0; }

int64_t AttentionConfig::get(const std::string& key) const {
  const int64_t i = find_config_key(kind_->settings(), key);
  TP_CHECK(i >= 0, "AttentionConfig", name(), " attention has no setting '", key, "'");
  return int64_t(values_[size_t(i)]);
}

AttentionConfig AttentionConfig::with(const std::string& key, int64_t value) const {
  const std::vector<Setting> settings = kind_->settings();
  const int64_t i = find_config_key(settings, key);
  TP_CHECK(i >= 0, "AttentionConfig", name(), " attention has no setting '", key, "'");
  check_config_value(settings[size_t(i)], double(value), "AttentionConfig");
  AttentionConfig out = *this;
  out.values_[size_t(i)] = double(value);
  return out;
}

std::string kind_names(bool (*keep)(const Kind&)) {
  std::vector<std::string> names;
  for (const Kind* k : kinds())
    if (keep(*k)) names.push_back(k->name());
  return join_names(names);
}

std::string kinds_help() {
  std::string out;
  for (const Kind* k : kinds()) {
    const std::string settings = config_defaults(k->settings());
    out += (out.empty() ? "" : "; ") + k->name() + (settings.empty() ? "" : ":" + settings);
  }
  return out;
}

std::string describe_kinds() {
  std::string out;
  for (const Kind* k : kinds()) {
    out += k->name() + ": " + k->summary() + "\n  causal form: " + (k->has_causal_form() ? "yes" : "no") + "\n";
    out += config_keys_help(k->settings(), "  ");
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
