// Improved clustered attention (Vyas et al. 2020, §3.3): clustered attention plus each query's exact
// attention on its cluster's top-k keys; its causal form is nn/attention/clustered.h's.
#include "nn/attention/clustered.h"
#include "nn/attention/config.h"
#include "nn/attention/full.h"

namespace tapestry::attention {

namespace {

class ImprovedClusteredKind final : public Kind {
 public:
  std::string name() const override { return "improved-clustered"; }
  std::string summary() const override {
    return "clustered attention plus exact attention on each cluster's top-k keys (Vyas et al. 2020, §3.3)";
  }
  std::vector<Setting> settings() const override {
    std::vector<Setting> s = clustering_settings();
    s.push_back({"topk", 32, 1, int64_t{1} << 20, "k, top keys per cluster"});
    s.push_back({"shared-qk", 0, 0, 1, "1: keys are the normalised query projection"});
    return s;
  }
  bool has_causal_form() const override { return true; }
  double score_elements(const AttentionConfig& c, int64_t n) const override { return double(c.get("clusters")) * double(n); }
  std::string not_inspected() const override { return ""; }
  Tensor attend(const AttentionConfig& c, const Tensor& q, const Tensor& k, const Tensor& v, const Padding& padding,
                Causal causal, Generator& gen, const State&) const override {
    check_qkv("attend", q, k, v);
    const ClusteringOptions options = clustering_options(c);
    if (causal == Causal::Yes)
      return causal_improved_clustered_attention(q, k, v, cluster_queries_causal(q, padding.query_lengths, options, gen),
                                                 c.get("topk"), padding);
    return improved_clustered_attention(q, k, v, cluster_queries(q, padding.query_lengths, options, gen), c.get("topk"),
                                        padding);
  }
};

}  // namespace

const Kind& improved_clustered_kind() {
  static const ImprovedClusteredKind kind;
  return kind;
}

}  // namespace tapestry::attention
