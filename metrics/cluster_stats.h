/// @file
/// What a clustering of words looks like from inside a model (tapestry inspect): how the words spread
/// over the clusters, how sure each word's assignment is, and how much two clusterings of the same
/// words differ. Plain numbers in, plain numbers out: the caller reads tensors to vectors.
///
/// Notation: C clusters, ids in [0, C); an id outside [0, C) (padding's virtual cluster C) is a word
/// that belongs to no cluster and is not counted.
#pragma once

#include <cstdint>
#include <vector>

namespace tapestry::metrics {

/// The members of each cluster among `ids`.
struct ClusterSizes {
  std::vector<int64_t> sizes;  ///< C entries
  int64_t words = 0;           ///< ids in [0, C)
  int64_t empty = 0;           ///< clusters with no member
  double largest_share = 0;    ///< max size / words (0 with no word)
};

/// Throws Error when clusters < 1.
ClusterSizes cluster_sizes(const std::vector<int64_t>& ids, int64_t clusters);

/// Entropy −Σ p log p (natural log) of the distribution proportional to `weights` (non-negative, not
/// all 0), divided by log(size) so that 0 is all weight on one entry and 1 is uniform; 0 for one
/// entry. Throws Error for a negative or non-finite weight, or all zeros.
double normalized_entropy(const std::vector<double>& weights);

/// The fraction of positions whose id differs between `a` and `b`, counting only the positions where
/// both ids are in [0, clusters) (a word padded in either is skipped); 0 when there is none. Throws
/// Error when the sizes differ.
double churn(const std::vector<int64_t>& a, const std::vector<int64_t>& b, int64_t clusters);

/// min, mean and max of some values (all 0 when there is none).
struct Spread {
  ///@{
  /// The smallest value, the mean and the largest.
  double min = 0, mean = 0, max = 0;
  ///@}
};
/// The Spread of `values` (all 0 when there is none).
Spread spread(const std::vector<double>& values);

/// The L2 norm of each row of a rows × cols row-major matrix. Throws Error when the size is not rows·cols.
std::vector<double> row_norms(const std::vector<double>& matrix, int64_t rows, int64_t cols);

}  // namespace tapestry::metrics
