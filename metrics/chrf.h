/// @file
/// Corpus chrF as sacreBLEU defines it by default (chrF2: character n-grams of orders 1..6, β = 2,
/// whitespace removed, mixed case, one reference per sentence; Popović, 2015):
///
///   metrics::ChrF chrf;
///   chrf.add(hypothesis, reference);   // for every sentence
///   chrf.score();                      // in 0..100
///
/// Definition. Each sentence has its whitespace removed (the characters Python's `\s` matches:
/// ASCII space, `\t` `\n` `\v` `\f` `\r`, `\x1c`–`\x1f`, U+0085, U+00A0, U+1680, U+2000–U+200A,
/// U+2028, U+2029, U+202F, U+205F, U+3000), and is read as Unicode code points from UTF-8 (a byte
/// that does not start a valid UTF-8 sequence counts as one character of its own). For each order
/// n = 1..6, over the whole corpus:
///   hyp_n   = Σ_sentences (number of hypothesis character n-grams), over the sentences whose
///             reference has n-grams of order n (sacreBLEU 2.x; 1.x counted every sentence, which
///             gives up to a few tenths of a point less on corpora with references shorter than 6
///             characters)
///   ref_n   = Σ_sentences (number of reference character n-grams)
///   match_n = Σ_sentences Σ_g min(count_hyp(g), count_ref(g))
/// The orders with hyp_n > 0 and ref_n > 0 are effective; P and R are the means of match_n / hyp_n
/// and match_n / ref_n over them, and
///   chrF = 100 · (1 + β²) · P · R / (β² · P + R)
/// which is 0 when no order is effective or P + R = 0.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace tapestry::metrics {

/// The corpus statistics above, accumulated sentence by sentence.
class ChrF {
 public:
  static constexpr int kOrder = 6;  ///< the highest character n-gram order
  static constexpr double kBeta = 2;  ///< β: recall weighs β times as much as precision

  /// Adds one sentence's counts.
  void add(const std::string& hypothesis, const std::string& reference);
  /// Adds another accumulator's counts (per-batch or per-rank counts combine exactly).
  void merge(const ChrF& other);
  /// The corpus chrF of what was added, in 0..100.
  double score() const;

 private:
  std::array<int64_t, kOrder> hyp_{}, ref_{}, match_{};
};

}  // namespace tapestry::metrics
