// CTC decoders on the host. Shapes: log_probs (T, C), read as a row-major (T, C) vector of doubles.
#include "nn/decode/ctc.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "core/error.h"

namespace tapestry::nn::decode {

namespace {

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

// log(e^a + e^b); −inf when both are −inf.
double log_add(double a, double b) {
  const double m = std::max(a, b);
  if (m == kMinusInfinity) return m;
  return m + std::log1p(std::exp(-std::abs(a - b)));
}

// log_probs (T, C) on the host after the checks every decoder shares.
std::vector<double> host_frames(const char* op, const Tensor& log_probs, int64_t length, int64_t blank) {
  TP_CHECK(log_probs.defined(), op, "got undefined log_probs");
  TP_CHECK(is_floating(log_probs.dtype()), op, "log_probs must be floating, got ", log_probs.dtype(), " of shape ",
           to_string(log_probs.shape()));
  TP_CHECK(log_probs.dim() == 2 && log_probs.shape()[1] >= 1, op,
           "log_probs must have shape (T, C) with at least one class, got ", to_string(log_probs.shape()));
  const int64_t T = log_probs.shape()[0], C = log_probs.shape()[1];
  TP_CHECK(length >= 0 && length <= T, op, "length = ", length, " is out of range [0, ", T, "] (T = ", T, ")");
  TP_CHECK(blank >= 0 && blank < C, op, "blank = ", blank, " is out of range for ", C, " classes");
  std::vector<double> v = log_probs.to_vector<double>();
  v.resize(static_cast<size_t>(length * C));
  return v;
}

struct PrefixScore {
  double blank = kMinusInfinity;      // p_b: paths ending in a blank
  double non_blank = kMinusInfinity;  // p_nb: paths ending in the prefix's last label
  double total() const { return log_add(blank, non_blank); }
};

}  // namespace

CtcHypothesis ctc_greedy_decode(const Tensor& log_probs, int64_t length, int64_t blank) {
  const std::vector<double> y = host_frames("ctc_greedy_decode", log_probs, length, blank);
  const int64_t C = log_probs.shape()[1];
  CtcHypothesis out;
  int64_t previous = -1;
  for (int64_t t = 0; t < length; ++t) {
    const double* row = y.data() + t * C;
    const int64_t k = std::max_element(row, row + C) - row;  // the first of equal maxima
    out.log_prob += row[k];
    if (k != blank && k != previous) out.labels.push_back(k);
    previous = k;
  }
  return out;
}

CtcHypothesis ctc_beam_search(const Tensor& log_probs, int64_t length, int64_t beam, int64_t blank) {
  const char* op = "ctc_beam_search";
  const std::vector<double> y = host_frames(op, log_probs, length, blank);
  TP_CHECK(beam >= 1, op, "beam must be at least 1, got ", beam);
  const int64_t C = log_probs.shape()[1];
  using Prefix = std::vector<int64_t>;
  // The beam, best first; the empty prefix holds every path before the first frame.
  std::vector<std::pair<Prefix, PrefixScore>> kept{{Prefix{}, PrefixScore{0.0, kMinusInfinity}}};
  for (int64_t t = 0; t < length; ++t) {
    const double* row = y.data() + t * C;
    std::map<Prefix, PrefixScore> next;
    for (const auto& [prefix, score] : kept) {
      const double all = score.total();
      PrefixScore& same = next[prefix];
      same.blank = log_add(same.blank, all + row[blank]);
      for (int64_t k = 0; k < C; ++k) {
        if (k == blank) continue;
        Prefix extended = prefix;
        extended.push_back(k);
        PrefixScore& longer = next[extended];
        if (!prefix.empty() && prefix.back() == k) {
          // a repeat without a blank between merges into the same prefix; after a blank it extends
          next[prefix].non_blank = log_add(next[prefix].non_blank, score.non_blank + row[k]);
          longer.non_blank = log_add(longer.non_blank, score.blank + row[k]);
        } else {
          longer.non_blank = log_add(longer.non_blank, all + row[k]);
        }
      }
    }
    kept.assign(next.begin(), next.end());
    // best total first; ties: shorter, then lexicographically smaller (the map's order is the latter)
    std::stable_sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
      const double ta = a.second.total(), tb = b.second.total();
      if (ta != tb) return ta > tb;
      return a.first.size() < b.first.size();
    });
    if (static_cast<int64_t>(kept.size()) > beam) kept.resize(static_cast<size_t>(beam));
  }
  return CtcHypothesis{kept.front().first, kept.front().second.total()};
}

}  // namespace tapestry::nn::decode
