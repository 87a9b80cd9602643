// Routing attention (Roy et al., TACL 2021): queries and keys routed to centroids that the layer
// keeps as its state and moves by online k-means after each training forward.
#include "nn/attention/config.h"
#include "nn/attention/routing.h"

namespace tapestry::attention {
namespace {

constexpr const char* kCentroids = "routing_centroids";  // the layer's buffer, (H, C, E)

class RoutingKind final : public Kind {
 public:
  std::string name() const override { return "routing"; }
  std::string summary() const override { return "content-based routing by online k-means (Roy et al. 2021)"; }
  std::vector<Setting> settings() const override {
    return {{"clusters", 100, 1, 65536, "C, routing centroids"},
            {"shared-qk", 0, 0, 1, "1: keys are the normalised query projection"}};
  }
  bool has_causal_form() const override { return true; }
  bool clusters_follow_length() const override { return true; }
  // An upper bound: causal routing is a masked full attention (balanced top-w routing scores ⌈S/C⌉
  // keys per query).
  double score_elements(const AttentionConfig&, int64_t n) const override { return double(n) * double(n); }
  std::string not_inspected() const override { return "routing attention is not inspected: its clusters are not read"; }
  State initial_state(const AttentionConfig& c, int64_t heads, int64_t head_dim, Generator& gen,
                      Options options) const override {
    return {{kCentroids, initial_routing_centroids(heads, c.get("clusters"), head_dim, gen, options)}};
  }
  Tensor attend(const AttentionConfig&, const Tensor& q, const Tensor& k, const Tensor& v, const Padding& padding,
                Causal causal, Generator&, const State& state) const override {
    const auto centroids = state.find(kCentroids);
    TP_CHECK(centroids != state.end(), "attend", "routing attention routes by centroids that a layer keeps and ",
             "updates; use routing_attention with the centroids (nn/attention/routing.h) or the attention layer");
    return routing_attention(q, k, v, centroids->second, padding, causal);
  }
  void update_state(const AttentionConfig&, const Tensor& q, const Tensor& k, const Padding& padding,
                    State& state) const override {
    Tensor& centroids = state.at(kCentroids);
    centroids = update_routing_centroids(q, k, centroids, padding);
  }
};

}  // namespace

const Kind& routing_kind() {
  static const RoutingKind kind;
  return kind;
}

}  // namespace tapestry::attention
