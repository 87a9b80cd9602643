/// @file
/// K-means in Euclidean space: Lloyd's iterations (Lloyd, 1982) from k-means++ seeds (Arthur &
/// Vassilvitskii, 2007). The hard-clustering baseline next to which ClusterFormer's appendix A
/// (Table 6) puts its neural clustering; no gradient, on the points' device.
///
///   seeding   c_1 a uniformly drawn point; then each next seed is point j with probability
///             D(j)² / Σ_j' D(j')², D(j) the distance from x_j to its nearest seed so far
///   assign    a_j = argmin_i |x_j − c_i|²  (the lowest i on a tie)
///   update    c_i = mean of the points with a_j = i; a cluster that lost every point keeps its centroid
///   stop      when no assignment changes, or after max_iterations updates
///
/// Shape letters: N points, D features, K clusters.
#pragma once

#include <cstdint>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"

namespace tapestry::models {

/// What kmeans returns.
struct KMeansResult {
  Tensor centroids;                 ///< (K, D)
  std::vector<int64_t> assignment;  ///< (N) in [0, K): each point's nearest centroid
  double inertia = 0;               ///< Σ_j |x_j − c_{a_j}|², for the final centroids and assignment
  int64_t iterations = 0;           ///< updates run
  bool converged = false;           ///< the last update changed no assignment
};

/// |x_j − c_i|² for every point and centroid (N, K), from x (N, D), its squared row norms x_squared
/// (N) and the centroids (K, D); clamped at 0 against rounding. Shared with the SOM (models/som.h).
Tensor squared_distances(const Tensor& x, const Tensor& x_squared, const Tensor& centroids);

/// Clusters the rows of x (N, D), float32 or float64, into K ≤ N clusters; draws the seeds from gen.
/// Throws Error unless x is a floating (N, D) matrix with N ≥ 1, 1 ≤ K ≤ N and max_iterations ≥ 0.
KMeansResult kmeans(const Tensor& x, int64_t clusters, int64_t max_iterations, Generator& gen);

}  // namespace tapestry::models
