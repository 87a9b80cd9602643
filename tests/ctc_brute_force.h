// CTC by enumeration, the oracle of the CTC loss and decoder tests: every one of the C^T frame-level
// paths of a tiny utterance, collapsed by Graves et al. (2006)'s map B (merge repeats, then drop
// blanks), with its probability Π_t y_t^{π_t}.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

namespace tapestry::testing {

// B(π): adjacent repeats merged, then blanks removed.
inline std::vector<int64_t> ctc_collapse(const std::vector<int64_t>& path, int64_t blank) {
  std::vector<int64_t> out;
  int64_t previous = -1;
  for (int64_t k : path) {
    if (k != previous && k != blank) out.push_back(k);
    previous = k;
  }
  return out;
}

// p(labelling | x) for every labelling with a nonzero probability; log_probs (T, C) row-major, in
// the first T frames.
inline std::map<std::vector<int64_t>, double> ctc_labelling_probabilities(const std::vector<double>& log_probs,
                                                                          int64_t T, int64_t C, int64_t blank) {
  std::map<std::vector<int64_t>, double> p;
  std::vector<int64_t> path(static_cast<size_t>(T), 0);
  while (true) {
    double lp = 0;
    for (int64_t t = 0; t < T; ++t) lp += log_probs[static_cast<size_t>(t * C + path[static_cast<size_t>(t)])];
    p[ctc_collapse(path, blank)] += std::exp(lp);
    int64_t t = 0;  // next path: count in base C
    while (t < T && ++path[static_cast<size_t>(t)] == C) path[static_cast<size_t>(t++)] = 0;
    if (t == T) break;
  }
  return p;
}

// −log p(z | x), +inf when no path yields z.
inline double ctc_brute_force_loss(const std::vector<double>& log_probs, int64_t T, int64_t C,
                                   const std::vector<int64_t>& z, int64_t blank) {
  const auto p = ctc_labelling_probabilities(log_probs, T, C, blank);
  const auto it = p.find(z);
  return it == p.end() ? INFINITY : -std::log(it->second);
}

}  // namespace tapestry::testing
