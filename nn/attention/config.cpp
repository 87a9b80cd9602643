#include "nn/attention/config.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "core/config_text.h"
#include "nn/attention/clustered.h"
#include "nn/attention/full.h"
#include "nn/attention/reformer.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace tapestry::attention {

namespace {

struct TypeInfo {
  AttentionType type;
  const char* name;
  std::vector<std::string> keys;
  int64_t clusters = AttentionConfig{}.clusters;  // the type's default number of clusters
};

const std::vector<TypeInfo>& types() {
  static const std::vector<TypeInfo> all{
      {AttentionType::Full, "full", {"shared-qk"}},
      {AttentionType::Clustered, "clustered", {"clusters", "bits", "iterations", "shared-qk"}},
      {AttentionType::ImprovedClustered, "improved-clustered", {"clusters", "bits", "iterations", "topk", "shared-qk"}},
      // ClusterFormer's k = 3 (§4.1, §4.3: translation and sentence matching): a block is N/3 words.
      {AttentionType::NeuralClustering, "neural-clustering", {"clusters", "losses"}, kNeuralClusteringClusters},
      {AttentionType::OracleTop, "oracle-top", {"topk", "shared-qk"}},
      {AttentionType::Routing, "routing", {"clusters", "shared-qk"}},
      {AttentionType::Reformer, "reformer", {"rounds", "bucket"}},
  };
  return all;
}

const TypeInfo& info(AttentionType type) {
  for (const auto& t : types())
    if (t.type == type) return t;
  return types().front();
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out.empty() ? "none" : out;
}

int64_t& field(AttentionConfig& c, const std::string& key) {
  if (key == "clusters") return c.clusters;
  if (key == "bits") return c.bits;
  if (key == "iterations") return c.iterations;
  if (key == "shared-qk") return c.shared_qk;
  if (key == "rounds") return c.rounds;
  if (key == "bucket") return c.bucket;
  return c.topk;
}

}  // namespace

std::string with_legacy_defaults(const std::string& text) {
  ConfigText items;
  try {
    items = split_config(text, "attention config");
  } catch (const Error&) {
    return text;  // not a config: the caller's own check reports it
  }
  if (items.type != type_name(AttentionType::NeuralClustering)) return text;
  const auto given = [&](const char* key) {
    return std::any_of(items.items.begin(), items.items.end(), [&](const auto& item) { return item.first == key; });
  };
  std::string out = text;
  const auto append = [&](const std::string& item) { out += (out.find(':') == std::string::npos ? ":" : ",") + item; };
  if (!given("clusters")) append("clusters=" + std::to_string(kLegacyNeuralClusteringClusters));
  if (!given("losses")) append(std::string("losses=") + losses_name(kLegacyClusteringLosses));
  return out;
}

const char* type_name(AttentionType type) { return info(type).name; }

bool shares_qk(const AttentionConfig& config) {
  return config.type == AttentionType::Reformer || config.shared_qk == 1;
}

AttentionConfig AttentionConfig::parse(const std::string& text) {
  const std::string op = "attention config '" + text + "'";
  const ConfigText items = split_config(text, op);
  const TypeInfo* type = nullptr;
  for (const auto& t : types())
    if (items.type == t.name) type = &t;
  if (!type) {
    std::vector<std::string> names;
    for (const auto& t : types()) names.push_back(t.name);
    fail(op, "unknown attention type '", items.type, "' (known: ", join(names), ")");
  }
  AttentionConfig config;
  config.type = type->type;
  config.clusters = type->clusters;
  for (const auto& [key, value] : items.items) {
    TP_CHECK(std::find(type->keys.begin(), type->keys.end(), key) != type->keys.end(), op, "'", key,
             "' is not a setting of ", type->name, " (settings: ", join(type->keys), ")");
    if (key == "losses") {
      config.losses = losses_from_name(value, op);
      continue;
    }
    TP_CHECK(value.size() < 10 && value.find_first_not_of("0123456789") == std::string::npos, op, key,
             " must be a non-negative integer, got '", value, "'");
    field(config, key) = std::stoll(value);
  }
  // Upper bounds keep a typo from hanging a run (iterations=999999999 ran Lloyd for hours); they are
  // far above what the papers use (C ≤ 200, L = 10, k ≤ 128).
  TP_CHECK(config.clusters >= 1 && config.clusters <= kMaxClusters, op, "clusters must be in [1, ", kMaxClusters,
           "], got ", config.clusters);
  TP_CHECK(config.bits >= 1 && config.bits <= 63, op, "bits must be in [1, 63], got ", config.bits);
  TP_CHECK(config.iterations <= kMaxIterations, op, "iterations must be in [0, ", kMaxIterations, "], got ",
           config.iterations);
  TP_CHECK(config.topk >= 1 && config.topk <= kMaxTopk, op, "topk must be in [1, ", kMaxTopk, "], got ",
           config.topk);
  TP_CHECK(config.shared_qk <= 1, op, "shared-qk must be 0 or 1, got ", config.shared_qk);
  TP_CHECK(config.rounds >= 1 && config.rounds <= kMaxRounds, op, "rounds must be in [1, ", kMaxRounds, "], got ",
           config.rounds);
  TP_CHECK(config.bucket >= 1 && config.bucket <= kMaxTopk, op, "bucket must be in [1, ", kMaxTopk, "], got ",
           config.bucket);
  return config;
}

std::string AttentionConfig::to_string() const {
  const TypeInfo& t = info(type);
  AttentionConfig copy = *this;  // field() hands out a mutable reference
  std::string out = t.name;
  bool first = true;
  for (const std::string& key : t.keys) {
    if (key == "shared-qk" && shared_qk == 0) continue;  // a flag is printed only when on
    const std::string value = key == "losses" ? losses_name(losses) : std::to_string(field(copy, key));
    out += (first ? ":" : ",") + key + "=" + value;
    first = false;
  }
  return out;
}

bool AttentionConfig::operator==(const AttentionConfig& other) const { return to_string() == other.to_string(); }

Tensor attend(const AttentionConfig& config, const Tensor& q, const Tensor& k, const Tensor& v,
              const Padding& padding, Causal causal, Generator& gen) {
  const ClusteringOptions options{config.clusters, config.bits, config.iterations};
  const Tensor keys = shares_qk(config) ? unit_rows(k) : k;
  switch (config.type) {
    case AttentionType::Full:
      return full_attention(q, keys, v, padding, causal);
    case AttentionType::OracleTop:
      return oracle_top_attention(q, keys, v, config.topk, padding, causal);
    case AttentionType::Reformer:
      return reformer_attention(q, keys, v, {config.rounds, config.bucket}, gen, padding, causal);
    case AttentionType::Clustered:
    case AttentionType::ImprovedClustered: {
      TP_CHECK(causal == Causal::No || config.type == AttentionType::ImprovedClustered, "attend",
               type_name(config.type), " attention has no causal form; use full, oracle-top, improved-clustered",
               " or neural-clustering for a causal model");
      check_qkv("attend", q, k, v);
      if (causal == Causal::Yes)
        return causal_improved_clustered_attention(q, keys, v, cluster_queries_causal(q, padding.query_lengths, options, gen),
                                                   config.topk, padding);
      const QueryClusters clusters = cluster_queries(q, padding.query_lengths, options, gen);
      return config.type == AttentionType::Clustered
                 ? clustered_attention(q, keys, v, clusters, padding)
                 : improved_clustered_attention(q, keys, v, clusters, config.topk, padding);
    }
    case AttentionType::Routing:
      fail("attend", "routing attention routes by centroids that a layer keeps and updates; use routing_attention ",
           "with the centroids (nn/attention/routing.h) or the attention layer");
    case AttentionType::NeuralClustering:
      break;
  }
  fail("attend", "neural-clustering attention sorts the hidden states before projecting them, so it ",
       "cannot be applied to given q/k/v; use neural_clustering_attention (or the attention layer)");
}

}  // namespace tapestry::attention
