/// @file
/// Corpus BLEU as sacreBLEU defines it (its defaults: the 13a tokenizer, n-grams 1..4, exponential
/// smoothing, mixed case), so that a score here reads like a score in a paper's table.
///
///   metrics::BleuScore s = metrics::corpus_bleu(hypotheses, references);   // one reference each
///   std::cout << s.to_string();   // BLEU = 53.73 83.3/60.0/50.0/33.3 (BP = 1.000 ratio = 1.000 ...)
///
/// or, accumulating over batches (and with several references per sentence):
///
///   metrics::Bleu bleu;
///   bleu.add(hypothesis, {reference_a, reference_b});
///   bleu.score();
///
/// Definition. Every sentence is tokenized by tokenize_13a (below). For each order n = 1..4, over
/// the whole corpus:
///   total_n = Σ_sentences (number of hypothesis n-grams)
///   match_n = Σ_sentences Σ_g min(count_hyp(g), max_refs count_ref(g))     (clipped counts)
///   p_n     = 100 · match_n / total_n
/// c = Σ hypothesis lengths (sys_len); r = Σ of each sentence's reference length closest to its
/// hypothesis length, the shorter one on a tie (ref_len).
///   BP   = 1 when c ≥ r;  exp(1 − r/c) when 0 < c < r;  0 when c = 0 < r
///   BLEU = BP · exp((1/4) Σ_n log p_n)      in 0..100
/// Smoothing 'exp' (mteval-v13a's): an order with total_n > 0 but match_n = 0 takes
/// p_n = 100 / (2^j · total_n), where this is the j-th such order (j = 1, 2, ...), so precision
/// decays instead of zeroing the geometric mean.
/// Degenerate cases, all as sacreBLEU:
///   - no n-gram of any order matches (all match_n = 0): BLEU = 0 and every p_n = 0;
///   - some order has total_n = 0 (every hypothesis shorter than n words): that p_n and those after
///     it are 0, and BLEU = 0 (a corpus of perfect two-word sentences scores 0);
///   - no sentence at all: BLEU = 0, BP = 1, lengths 0.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tapestry::metrics {

/// sacreBLEU's default `13a` tokenizer (mteval-v13a's language-independent rules), returned as
/// tokens joined by single spaces. In order:
///   1. remove `"<skipped>"`; join `"-\n"` (a hyphenated line break); other `"\n"` become spaces;
///      unescape \&quot; \&amp; \&lt; \&gt; (in that order, each replaced once, left to right);
///   2. pad the line with a space on each side;
///   3. put spaces around every ASCII punctuation character except ' , - . (so
///      `!` &quot; `# $ % & ( ) * + / : ; < = > ? @ [ \ ] ^ _` \` `{ | } ~` become tokens);
///   4. split off '.' and ',' unless preceded by a digit, then unless followed by a digit (so
///      "3.50" and "1,000" stay whole, "end." and "a, b" split);
///   5. split off '-' after a digit ("10-20" → "10 - 20"; "well-known" stays);
///   6. collapse whitespace.
/// Steps 4 and 5 scan left to right without overlap, as Python's re.sub does. Text is bytes (UTF-8
/// passes through untouched); whitespace is ASCII whitespace and the separators `\x1c`–`\x1f`, as in
/// Python's str.split — non-ASCII spaces such as U+00A0, which sacreBLEU also splits at, stay
/// inside tokens here.
std::string tokenize_13a(const std::string& line);

/// A corpus BLEU score with the statistics it was computed from (see the top of this file).
struct BleuScore {
  double score = 0;                     ///< 0..100
  std::array<double, 4> precisions{};   ///< p_1..p_4 in percent, after smoothing
  double bp = 1;                        ///< brevity penalty
  ///@{
  /// c and r above, in tokens
  int64_t sys_len = 0, ref_len = 0;
  ///@}
  ///@{
  /// match_n, total_n
  std::array<int64_t, 4> matches{}, totals{};
  ///@}

  /// sys_len / ref_len; 0 when ref_len = 0.
  double ratio() const;
  /// sacreBLEU's line: "BLEU = 32.11 63.6/38.9/25.0/16.7 (BP = 1.000 ratio = 1.100 hyp_len = 11
  /// ref_len = 10)" — score with 2 decimals, precisions with 1, BP and ratio with 3.
  std::string to_string() const;
};

/// The corpus statistics above, accumulated sentence by sentence.
class Bleu {
 public:
  /// Adds one hypothesis with its references (at least one; trailing whitespace is stripped, as
  /// sacreBLEU does). Throws when `references` is empty.
  void add(const std::string& hypothesis, const std::vector<std::string>& references);
  /// Adds another accumulator's statistics (per-batch or per-rank counts combine exactly).
  void merge(const Bleu& other);
  /// The corpus BLEU of what was added.
  BleuScore score() const;

 private:
  int64_t sys_len_ = 0, ref_len_ = 0;
  std::array<int64_t, 4> matches_{}, totals_{};
};

/// BLEU of hypotheses[i] against references[i]. Throws when the counts differ.
BleuScore corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references);

}  // namespace tapestry::metrics
