/// @file
/// The parameters of ClusterFormer's neural clustering on its own (appendix A, Table 6): the
/// centroids C and the map W_C of the points into the space they meet the centroids in (eq. 2),
/// trained by the clustering losses of nn/attention/neural_clustering.h with no task around them.
///
///   Centroids model(points, k, /*scale=*/1.0, PointMap::Learned, gen);
///   attention::neural_clustering(words, model.centroids, model.w_c, Tensor(), losses);
///
/// Shape letters: N points, D features, k centroids.
#pragma once

#include <cstdint>

#include "core/random.h"
#include "core/tensor.h"
#include "nn/module.h"

namespace tapestry::models {

/// Whether W_C is a parameter or the fixed identity.
enum class PointMap {
  Identity,  ///< W_C is the identity, not a parameter (w_c stays undefined)
  Learned,   ///< W_C is a parameter, starting at the identity
};

/// The centroids C (k, D) and, with PointMap::Learned, W_C (D, D): a Module named
/// "NeuralClustering" whose parameters are "centroids" and "w_c".
class Centroids : public nn::Module {
 public:
  /// k distinct points of `points` (N, D), drawn with `gen`, times `scale`, on the points' device;
  /// W_C, when learned, from the identity, so that training starts where the fixed identity is.
  Centroids(const Tensor& points, int64_t k, double scale, PointMap map, Generator& gen);

  Tensor centroids;  ///< (k, D)
  Tensor w_c;        ///< (D, D), or undefined: the identity
};

}  // namespace tapestry::models
