/// @file
/// Multinomial naive Bayes over token counts (McCallum & Nigam, 1998): the bag-of-words floor that a
/// classification table reports next to the attention models. It needs no attention, no gradients
/// and no device; fitting is one pass of counting.
///
///   log p(c | d) = log π_c + Σ_t n_t(d) · log θ_{c,t} − log Z(d)
///   π_c = N_c / N                                  (documents of class c among the training ones)
///   θ_{c,t} = (n_{c,t} + α) / (Σ_t' n_{c,t'} + α·V)  (token t's count in class c, add-α smoothed)
///
/// Shape letters: V vocabulary, K classes.
#pragma once

#include <cstdint>
#include <vector>

namespace tapestry::models {

/// The multinomial naive Bayes classifier of this file.
class NaiveBayes {
 public:
  /// Throws Error unless vocabulary ≥ 1, classes ≥ 1 and alpha > 0.
  NaiveBayes(int64_t vocabulary, int64_t classes, double alpha = 1.0);

  /// Counts the documents (token ids in [0, V)) with their labels (in [0, K)); may be called again
  /// to add more. Throws Error for sizes that differ, a token or a label out of range.
  void fit(const std::vector<std::vector<int64_t>>& documents, const std::vector<int64_t>& labels);

  /// log p(c | document) for every class c (K, normalised: their exponentials sum to 1). A class
  /// without training documents has probability 0 (−inf). Throws Error before any fit, or for a token
  /// out of range.
  std::vector<double> log_posterior(const std::vector<int64_t>& document) const;
  /// The most probable class (the lowest index among ties).
  int64_t predict(const std::vector<int64_t>& document) const;

  int64_t vocabulary() const { return v_; }  ///< V
  int64_t classes() const { return k_; }  ///< K

 private:
  int64_t v_, k_;
  double alpha_;
  std::vector<int64_t> documents_;  ///< (K) training documents per class
  std::vector<int64_t> counts_;     ///< (K, V) token counts per class, row-major
};

}  // namespace tapestry::models
