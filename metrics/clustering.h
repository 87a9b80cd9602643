/// @file
/// Scores of a clustering against the true classes of its points: the contingency table they share,
/// majority-label accuracy (ClusterFormer's clustering accuracy), one-to-one matched accuracy, and
/// normalised mutual information.
///
///   std::vector<int64_t> cluster = ..., label = ...;   // one entry per point
///   metrics::ContingencyTable table(cluster, label);
///   metrics::majority_accuracy(table), metrics::matched_accuracy(table),
///   metrics::normalized_mutual_info(table);
///
/// Notation: n points; n_kc points in cluster k with class c; a_k = Σ_c n_kc the size of cluster k,
/// b_c = Σ_k n_kc the size of class c. Cluster ids and class ids are arbitrary non-negative integers
/// (only equality matters); the table's rows are the distinct cluster ids in increasing order, its
/// columns the distinct class ids.
///
/// Degenerate cases:
///   input                      majority   matched        NMI
///   one cluster, one class     1          1              1 (both partitions trivial: a perfect match)
///   one cluster, classes b_c   max_c b_c/n  max_c b_c/n   0
///   clusters a_k, one class    1          max_k a_k/n    0
///   no point                   throws     throws         throws
/// (scikit-learn's normalized_mutual_info_score agrees on the first three rows; for empty input it
/// returns 1.)
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tapestry::metrics {

/// n_kc for the points of a clustering. Throws when the lengths differ or an id is negative.
class ContingencyTable {
 public:
  /// The table of the points whose cluster ids are `clusters` and class ids `classes` (one of each
  /// per point).
  ContingencyTable(const std::vector<int64_t>& clusters, const std::vector<int64_t>& classes);

  int64_t num_clusters() const { return int64_t(cluster_ids_.size()); }  ///< distinct clusters
  int64_t num_classes() const { return int64_t(class_ids_.size()); }     ///< distinct classes
  int64_t total() const { return total_; }                                ///< n
  /// n_kc for row k (0..num_clusters-1) and column c (0..num_classes-1).
  int64_t count(int64_t k, int64_t c) const;
  int64_t cluster_size(int64_t k) const;  ///< a_k
  int64_t class_size(int64_t c) const;    ///< b_c
  ///@{
  /// The original ids of the rows and the columns.
  const std::vector<int64_t>& cluster_ids() const { return cluster_ids_; }
  const std::vector<int64_t>& class_ids() const { return class_ids_; }
  ///@}

 private:
  std::vector<int64_t> cluster_ids_, class_ids_;
  std::vector<int64_t> counts_;  ///< (num_clusters, num_classes), row-major
  int64_t total_ = 0;
};

/// ClusterFormer's clustering accuracy (appendix A, Table 6): each cluster is labelled with the
/// majority class of its members, and a point is correct when its cluster's label is its class:
///   majority = (1/n) Σ_k max_c n_kc      (also called purity)
/// Many clusters may share a label, so it never falls as clusters are split: one point per cluster
/// scores 1. The paper does not spell the measure out; its accuracy rising with the number of
/// centroids (60.7 at k = 10 to 93.6 at k = 300 on MNIST) is this measure's signature.
double majority_accuracy(const ContingencyTable& table);

/// The accuracy of the best one-to-one matching between clusters and classes, as common in the
/// clustering literature (Hungarian matching):
///   matched = (1/n) max_σ Σ_k n_{k,σ(k)}   over injective matchings σ of clusters to classes
/// (of classes to clusters when there are more clusters than classes; unmatched points count as
/// wrong). Computed exactly by min_cost_assignment (metrics/assignment.h) in O(K³).
double matched_accuracy(const ContingencyTable& table);

/// Normalised mutual information with the arithmetic-mean normaliser (scikit-learn's
/// normalized_mutual_info_score default):
///   MI   = Σ_{k,c} (n_kc/n) · log(n·n_kc / (a_k·b_c))
///   H(K) = −Σ_k (a_k/n) log(a_k/n),   H(C) = −Σ_c (b_c/n) log(b_c/n)
///   NMI  = MI / ((H(K) + H(C)) / 2)       in [0, 1]; the log's base cancels
/// With one cluster and one class (H(K) = H(C) = 0) NMI is 1; otherwise MI = 0 gives 0.
double normalized_mutual_info(const ContingencyTable& table);

/// The scores of a clustering against the classes of its points (one cluster id and one class id
/// per point), named and in the order a report shows them: majority_accuracy, matched_accuracy,
/// nmi, and clusters_used (the distinct cluster ids). Throws as ContingencyTable does.
std::vector<std::pair<std::string, double>> label_scores(const std::vector<int64_t>& clusters,
                                                         const std::vector<int64_t>& classes);

}  // namespace tapestry::metrics
