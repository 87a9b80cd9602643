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
    return {{"shared-qk", 0, 0, 1, "1: keys are the normalised query projection (Reformer's shared-QK)"}};
  }
  bool has_causal_form() const override { return true; }
  bool decodes_incrementally() const override { return true; }
  double score_elements(const AttentionConfig&, int64_t n) const override { return double(n) * double(n); }
  std::string not_inspected() const override {
    return "full attention has no clusters and no clustering losses: every query attends to every key and the "
           "task loss is the only loss";
  }
  Tensor attend(const AttentionConfig&, const Tensor& q, const Tensor& k, const Tensor& v, const Padding& padding,
                Causal causal, Generator&, const State&) const override {
    return full_attention(q, k, v, padding, causal);
  }
};

}  // namespace

const Kind& full_kind() {
  static const FullKind kind;
  return kind;
}

}  // namespace tapestry::attention
