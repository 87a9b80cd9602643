// Clustered attention (Vyas et al. 2020, §3.2): attention once per cluster of queries.
#include "nn/attention/clustered.h"
#include "nn/attention/config.h"
#include "nn/attention/full.h"

namespace tapestry::attention {

std::vector<Setting> clustering_settings() {
  return {{"clusters", 100, 1, 65536, "C, query clusters"},
          {"bits", 63, 1, 63, "R, hash bits"},
          {"iterations", 10, 0, 1000, "L, Lloyd iterations"}};
}

ClusteringOptions clustering_options(const AttentionConfig& c) {
  return {c.get("clusters"), c.get("bits"), c.get("iterations")};
}

namespace {

class ClusteredKind final : public Kind {
 public:
  std::string name() const override { return "clustered"; }
  std::string summary() const override { return "attention per cluster of queries (Vyas et al. 2020, §3.2)"; }
  std::vector<Setting> settings() const override {
    std::vector<Setting> s = clustering_settings();
    s.push_back({"shared-qk", 0, 0, 1, "1: keys are the normalised query projection"});
    return s;
  }
  bool has_causal_form() const override { return false; }
  double score_elements(const AttentionConfig& c, int64_t n) const override { return double(c.get("clusters")) * double(n); }
  std::string not_inspected() const override { return ""; }
  Tensor attend(const AttentionConfig& c, const Tensor& q, const Tensor& k, const Tensor& v, const Padding& padding,
                Causal causal, Generator& gen, const State&) const override {
    TP_CHECK(causal == Causal::No, "attend", "clustered attention has no causal form; use one of ",
             kind_names([](const Kind& k) { return k.has_causal_form(); }), " for a causal model");
    check_qkv("attend", q, k, v);
    return clustered_attention(q, k, v, cluster_queries(q, padding.query_lengths, clustering_options(c), gen), padding);
  }
};

}  // namespace

const Kind& clustered_kind() {
  static const ClusteredKind kind;
  return kind;
}

}  // namespace tapestry::attention
