// Full softmax attention (Vaswani et al. 2017), optionally with shared queries and keys.
#include "nn/attention/config.h"
#include "nn/attention/full.h"

namespace tapestry::attention {
namespace {

class FullKind final : public Kind {
 public:
  std::string name() const override { return "full"; }
  std::string summary() const override { return "softmax over every key (Vaswani et al. 2017)"; }
  std::vector<Setting> settings() const override {
    return {{"shared-qk", 0, 0, 1, "1: keys are the normalised query projection (Reformer's shared-QK)"},
            {"fused", 1, 0, 1,
             "1: tile by tile, holding no N x N scores (ops/attention.h); 0: the scores held (faster on a GPU from "
             "N = 2048 where memory allows: docs/PERFORMANCE.md)"}};
  }
  bool has_causal_form() const override { return true; }
  bool decodes_incrementally() const override { return true; }
  // Fused, a query keeps one value (its log-sum-exp) and each thread a fixed workspace; on a GPU, head
  // dims above kFusedAttentionMaxHeadDim fall back to the held scores, which this model does not see.
  double score_elements(const AttentionConfig& c, int64_t n) const override {
    return c.get("fused") ? double(n) : double(n) * double(n);
  }
  std::string not_inspected() const override {
    return "full attention has no clusters and no clustering losses: every query attends to every key and the "
           "task loss is the only loss";
  }
  Tensor attend(const AttentionConfig& c, const Tensor& q, const Tensor& k, const Tensor& v, const Padding& padding,
                Causal causal, Generator&, const State&) const override {
    return full_attention(q, k, v, padding, causal, c.get("fused") ? Fused::Yes : Fused::No);
  }
};

}  // namespace

const Kind& full_kind() {
  static const FullKind kind;
  return kind;
}

}  // namespace tapestry::attention
