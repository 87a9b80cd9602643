// Neural clustering attention (ClusterFormer, Wang et al., ACL 2022): the hidden states are clustered
// and sorted before the projections, so it is a layer of its own (nn/clusterformer.h), not an
// attention over given q/k/v.
#include <cmath>

#include "nn/attention/config.h"
#include "nn/attention/neural_clustering.h"

namespace tapestry::attention {
namespace {

class NeuralClusteringKind final : public Kind {
 public:
  std::string name() const override { return "neural-clustering"; }
  std::string summary() const override {
    return "ClusterFormer's learned clustering of the hidden states, attention within blocks (Wang et al. 2022)";
  }
  std::vector<Setting> settings() const override {
    // ClusterFormer's k = 3 (§4.1, §4.3: translation and sentence matching): a block is N/3 words.
    // The losses' names in ClusteringLosses's order; cosine, a bounded departure from the paper, is
    // the default (losses=printed is eq. 6 as printed).
    return {{"clusters", kNeuralClusteringClusters, 1, 65536, "k, clusters (blocks of N/k words)"},
            {"losses", int64_t(ClusteringLosses::Cosine), 0, 2, "the clustering losses' form",
             {losses_name(ClusteringLosses::Projected), losses_name(ClusteringLosses::Printed),
              losses_name(ClusteringLosses::Cosine)}},
            {"fused", 1, 0, 1,
             "1: each block's attention tile by tile, holding no scores (ops/attention.h); 0: the blocks' scores "
             "held"}};
  }
  Form form() const override { return Form::HiddenStates; }
  bool has_causal_form() const override { return true; }  // masked within blocks (appendix B)
  bool clusters_follow_length() const override { return true; }
  // Each of the N queries scores the 2⌈N/k⌉ keys of its block and the one before it; fused, it keeps
  // one value (its log-sum-exp), at least (a GPU holds the scores).
  double score_elements(const AttentionConfig& c, int64_t n) const override {
    if (c.get("fused")) return double(n);
    return double(n) * 2 * std::ceil(double(n) / double(c.get("clusters")));
  }
  std::string not_inspected() const override { return ""; }
  Tensor attend(const AttentionConfig&, const Tensor&, const Tensor&, const Tensor&, const Padding&, Causal, Generator&,
                const State&) const override {
    fail("attend", "neural-clustering attention sorts the hidden states before projecting them, so it ",
         "cannot be applied to given q/k/v; use neural_clustering_attention (or the attention layer)");
  }
};

}  // namespace

const Kind& neural_clustering_kind() {
  static const NeuralClusteringKind kind;
  return kind;
}

}  // namespace tapestry::attention
