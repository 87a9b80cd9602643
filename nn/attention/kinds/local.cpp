// Sliding-window (local) attention, the banded baseline of Longformer and BigBird: each query sees
// the keys within `window` positions of its own (nn/attention/local.h).
#include "nn/attention/config.h"
#include "nn/attention/local.h"

namespace tapestry::attention {
namespace {

class LocalKind final : public Kind {
 public:
  std::string name() const override { return "local"; }
  std::string summary() const override {
    return "each query sees the keys within `window` positions (Longformer's sliding window, Beltagy et al. 2020)";
  }
  std::vector<Setting> settings() const override {
    return {{"window", 32, 0, int64_t{1} << 20, "W, keys on each side of a query (2W + 1 in all, W + 1 causally)"}};
  }
  bool has_causal_form() const override { return true; }
  double score_elements(const AttentionConfig& c, int64_t n) const override {
    return double(n) * double(std::min<int64_t>(2 * c.get("window") + 1, n));
  }
  std::string not_inspected() const override { return "local attention is not inspected: it has no clusters"; }
  Tensor attend(const AttentionConfig& c, const Tensor& q, const Tensor& k, const Tensor& v, const Padding& padding,
                Causal causal, Generator&, const State&) const override {
    return local_attention(q, k, v, c.get("window"), padding, causal);
  }
};

}  // namespace

const Kind& local_kind() {
  static const LocalKind kind;
  return kind;
}

}  // namespace tapestry::attention
