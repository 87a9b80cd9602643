/// @file
/// Levenshtein distance with the edit counts of one optimal alignment, and the error rate built on
/// it: phoneme error rate (PER) over phoneme ids, word error rate (WER) over words, character error
/// rate over the characters of a string.
///
///   metrics::EditCounts e = metrics::edit_distance(reference, hypothesis);
///   metrics::ErrorRate wer;
///   for (each utterance) wer.add(data::words(reference), data::words(hypothesis));  // data/text_lines.h
///   wer.value();
///
/// The distance is the fewest substitutions, insertions and deletions that turn the reference into
/// the hypothesis (each edit costs 1):
///   d(i, 0) = i,  d(0, j) = j,
///   d(i, j) = min(d(i−1, j−1) + [ref_i ≠ hyp_j],  d(i−1, j) + 1,  d(i, j−1) + 1)
/// An insertion is a hypothesis token with no reference counterpart, a deletion a reference token
/// missing from the hypothesis. Several alignments can be optimal with different counts (reference
/// "a b", hypothesis "b a": two substitutions, or a deletion and an insertion); the counts reported
/// are those of the alignment that, at every cell, prefers the diagonal step (match or substitution),
/// then a deletion, then an insertion — so here, two substitutions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tapestry::metrics {

/// The edits of one optimal alignment of a hypothesis to its reference.
struct EditCounts {
  ///@{
  /// The substitutions, insertions and deletions of the alignment.
  int64_t substitutions = 0, insertions = 0, deletions = 0;
  ///@}
  /// The Levenshtein distance: all edits.
  int64_t distance() const { return substitutions + insertions + deletions; }
};

/// The distance from `reference` to `hypothesis`, with the counts of the alignment described at the
/// top of this file, over ids (phonemes, tokens).
EditCounts edit_distance(const std::vector<int64_t>& reference, const std::vector<int64_t>& hypothesis);
/// As above, over words.
EditCounts edit_distance(const std::vector<std::string>& reference, const std::vector<std::string>& hypothesis);
/// Over the bytes of the strings (characters, for ASCII text).
EditCounts edit_distance(const std::string& reference, const std::string& hypothesis);

/// Total edits over total reference length, summed over the pairs added:
///   rate = Σ (S + I + D) / Σ |reference|
/// It exceeds 1 when the hypotheses insert more than the references hold. With total reference
/// length 0 the rate is 0 when there are no edits either, and +infinity otherwise (insertions
/// against nothing to recognise).
class ErrorRate {
 public:
  /// Aligns one pair, adds its counts and reference length, and returns its counts.
  EditCounts add(const std::vector<int64_t>& reference, const std::vector<int64_t>& hypothesis);
  /// As above, over words.
  EditCounts add(const std::vector<std::string>& reference, const std::vector<std::string>& hypothesis);
  /// Adds another accumulator's counts and reference length.
  void merge(const ErrorRate& other);

  const EditCounts& counts() const { return counts_; }  ///< the edits, summed over the pairs added
  int64_t reference_length() const { return reference_length_; }  ///< Σ |reference|
  /// The rate above.
  double value() const;

 private:
  void count(const EditCounts& e, size_t reference_length);

  EditCounts counts_;
  int64_t reference_length_ = 0;
};

}  // namespace tapestry::metrics
