/// @file
/// A self-organising map (Kohonen, 1982), trained by the batch algorithm (Kohonen, "Essentials of
/// the self-organizing map", Neural Networks 37, 2013, §5): the other hard-clustering baseline of
/// ClusterFormer's appendix A (Table 6). No gradient, on the points' device.
///
///   grid      K units on a rows × cols lattice, rows the largest divisor of K not above √K (so 10 is
///             2 × 5, 100 is 10 × 10, 300 is 15 × 20); g_i the lattice position of unit i
///   start     the weights w_i are K distinct points drawn with the generator
///   epoch t   b_j = argmin_i |x_j − w_i|² (the best-matching unit, lowest i on a tie);
///             h_ik = exp(−|g_i − g_k|² / (2 σ_t²)), σ_t = σ_0 · (σ_T / σ_0)^(t / (T − 1));
///             w_k = Σ_j h_{b_j k} x_j / Σ_j h_{b_j k}   (a unit no point reaches keeps its weights)
///   result    each point's best-matching unit under the final weights
///
/// σ_0 = max(rows, cols) / 2 lets the first epochs order the whole map. The default σ_T = 0.1 leaves a
/// unit a weight of exp(−50) on its lattice neighbours' points, so the last updates are K-means'
/// (Lloyd's), started from the ordered map; σ_T = 0.5 (a weight of exp(−2) ≈ 0.14) keeps the map
/// smooth at some cost in quantisation error. On MNIST (k = 10 and 100, seed 0) σ_T = 0.1 clustered
/// best of 0.1, 0.3 and 0.5 (docs/RESULTS.md).
///
/// Shape letters: N points, D features, K units.
#pragma once

#include <cstdint>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"

namespace tapestry::models {

/// The settings of som.
struct SomOptions {
  int64_t units = 10;        ///< K
  int64_t epochs = 30;       ///< T batch updates
  double final_sigma = 0.1;  ///< σ_T, in lattice steps
};

/// What som returns.
struct SomResult {
  Tensor weights;                   ///< (K, D)
  ///@{
  /// the lattice: unit i sits at `(i / cols, i % cols)`
  int64_t rows = 0, cols = 0;
  ///@}
  std::vector<int64_t> assignment;  ///< (N) in [0, K): each point's best-matching unit
  double quantization_error = 0;    ///< Σ_j |x_j − w_{b_j}|², for the final weights and assignment
};

/// Trains a map on the rows of x (N, D), float32 or float64, drawing the start from gen. Throws Error
/// unless x is a floating (N, D) matrix with N ≥ 1, 1 ≤ units ≤ N, epochs ≥ 1 and final_sigma > 0.
SomResult som(const Tensor& x, const SomOptions& options, Generator& gen);

}  // namespace tapestry::models
