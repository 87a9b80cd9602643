// Reformer's LSH attention (Kitaev et al. 2020): shared queries and keys hashed into buckets, chunks
// attending to themselves and their neighbour, over several hashing rounds.
#include "nn/attention/config.h"
#include "nn/attention/reformer.h"

namespace tapestry::attention {
namespace {

class ReformerKind final : public Kind {
 public:
  std::string name() const override { return "reformer"; }
  std::string summary() const override { return "LSH buckets of shared queries and keys (Kitaev et al. 2020)"; }
  std::vector<Setting> settings() const override {
    return {{"rounds", 4, 1, 64, "hashing rounds"}, {"bucket", 32, 1, int64_t{1} << 20, "W, bucket and chunk size"}};
  }
  bool has_causal_form() const override { return true; }
  bool shares_qk(const AttentionConfig&) const override { return true; }
  // An upper bound (each round a query scores its chunk and the one before, 2W keys).
  double score_elements(const AttentionConfig&, int64_t n) const override { return double(n) * double(n); }
  std::string not_inspected() const override { return "reformer attention is not inspected: its buckets are not read"; }
  Tensor attend(const AttentionConfig& c, const Tensor& q, const Tensor& k, const Tensor& v, const Padding& padding,
                Causal causal, Generator& gen, const State&) const override {
    return reformer_attention(q, k, v, {c.get("rounds"), c.get("bucket")}, gen, padding, causal);
  }
};

}  // namespace

const Kind& reformer_kind() {
  static const ReformerKind kind;
  return kind;
}

}  // namespace tapestry::attention
