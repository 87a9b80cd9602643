// Oracle top-k: each query attends to its k highest-scoring keys, found by computing every score (a
// quality bound for sparse attention, the clustered-attention paper's "oracle-top").
#include "nn/attention/config.h"
#include "nn/attention/full.h"

namespace tapestry::attention {
namespace {

class OracleTopKind final : public Kind {
 public:
  std::string name() const override { return "oracle-top"; }
  std::string summary() const override { return "each query's top-k keys by exact score (Vyas et al. 2020, §4)"; }
  std::vector<Setting> settings() const override {
    return {{"topk", 32, 1, int64_t{1} << 20, "k, keys per query"},
            {"shared-qk", 0, 0, 1, "1: keys are the normalised query projection"}};
  }
  bool has_causal_form() const override { return true; }
  double score_elements(const AttentionConfig&, int64_t n) const override { return double(n) * double(n); }
  std::string not_inspected() const override {
    return "oracle-top attention is not inspected: it has no clusters";
  }
  Tensor attend(const AttentionConfig& c, const Tensor& q, const Tensor& k, const Tensor& v, const Padding& padding,
                Causal causal, Generator&, const State&) const override {
    return oracle_top_attention(q, k, v, c.get("topk"), padding, causal);
  }
};

}  // namespace

const Kind& oracle_top_kind() {
  static const OracleTopKind kind;
  return kind;
}

}  // namespace tapestry::attention
