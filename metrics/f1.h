/// @file
/// A confusion matrix over K classes and the scores read from it: per-class precision, recall and
/// F1, macro-F1, accuracy.
///
///   metrics::ConfusionMatrix cm(15);
///   for (each example) cm.add(prediction, target);
///   cm.macro_f1(), cm.accuracy(), cm.f1(c);
///
/// Entry (t, p) counts the examples of true class t predicted as p (rows: targets, columns:
/// predictions, as scikit-learn's confusion_matrix). For class c:
///   TP_c = n(c, c),  FP_c = Σ_{t≠c} n(t, c),  FN_c = Σ_{p≠c} n(c, p)
///   precision_c = TP_c / (TP_c + FP_c)      0 when c was never predicted
///   recall_c    = TP_c / (TP_c + FN_c)      0 when c has no support (never a target)
///   F1_c        = 2·TP_c / (2·TP_c + FP_c + FN_c)   (= 2PR/(P+R)); 0 when TP_c = 0
/// These zeros are scikit-learn's zero_division=0.
///
/// macro-F1 is the mean of F1_c over the classes that occur, as a target or as a prediction; a class
/// with no support and no predictions carries no evidence either way and is left out (scikit-learn's
/// f1_score(y_true, y_pred, average="macro", zero_division=0) with its default labels; passing
/// labels=range(K) there would count such a class as 0 instead). With nothing counted, macro-F1 and
/// accuracy are 0.
#pragma once

#include <cstdint>
#include <vector>

namespace tapestry::metrics {

/// Counts of (target, prediction) pairs over K classes, and the scores above.
class ConfusionMatrix {
 public:
  /// The matrix holds K² counts; a larger K (a vocabulary) is scored with Accuracy instead.
  static constexpr int64_t kMaxClasses = 16384;

  /// K = num_classes classes, indices 0..K-1; throws unless 1 ≤ K ≤ kMaxClasses.
  explicit ConfusionMatrix(int64_t num_classes);

  /// Counts one example. Throws when a class index is outside 0..K-1.
  void add(int64_t prediction, int64_t target);
  /// Counts predictions[i] against targets[i] for every i. Throws when the lengths differ.
  void add(const std::vector<int64_t>& predictions, const std::vector<int64_t>& targets);
  /// Adds another matrix's counts; throws when its K differs.
  void merge(const ConfusionMatrix& other);

  int64_t num_classes() const { return k_; }  ///< K
  int64_t count(int64_t target, int64_t prediction) const;  ///< n(target, prediction)
  int64_t total() const { return total_; }  ///< the examples counted
  int64_t support(int64_t c) const;    ///< examples whose target is c: TP_c + FN_c
  int64_t predicted(int64_t c) const;  ///< examples predicted as c: TP_c + FP_c

  double precision(int64_t c) const;  ///< precision_c above
  double recall(int64_t c) const;  ///< recall_c above
  double f1(int64_t c) const;  ///< F1_c above
  double macro_f1() const;  ///< macro-F1 above
  double accuracy() const;  ///< Σ_c n(c, c) / total

 private:
  void check_class(const char* op, const char* what, int64_t c) const;

  int64_t k_;
  std::vector<int64_t> counts_;  ///< (K, K) row-major: counts_[target·K + prediction]
  int64_t total_ = 0;
};

}  // namespace tapestry::metrics
