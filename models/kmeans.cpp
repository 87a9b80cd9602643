#include "models/kmeans.h"

#include <algorithm>
#include <limits>

#include "core/autograd.h"
#include "core/creation.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/shape.h"

namespace tapestry::models {

namespace {

constexpr const char* kOp = "kmeans";

// A uniform draw in [0, 1) from gen.
double uniform(Generator& gen) { return rand({}, gen, {DType::Float64}).item<double>(); }

// k-means++ (Arthur & Vassilvitskii, 2007, §2.2): the indices of K seed points.
std::vector<int64_t> seed_indices(const Tensor& x, const Tensor& x_squared, int64_t clusters, Generator& gen) {
  const int64_t n = x.size(0);
  std::vector<int64_t> seeds{std::min<int64_t>(n - 1, int64_t(uniform(gen) * double(n)))};
  std::vector<double> nearest;  // (N) D(j)², the squared distance to the nearest seed so far
  for (int64_t i = 1; i < clusters; ++i) {
    const Tensor last = index_select(x, 0, from_vector<int64_t>({seeds.back()}, {1}, x.device()));  // (1, D)
    const std::vector<double> d = to(reshape(squared_distances(x, x_squared, last), {n}), DType::Float64).to_vector<double>();
    if (nearest.empty()) nearest = d;
    else
      for (int64_t j = 0; j < n; ++j) nearest[size_t(j)] = std::min(nearest[size_t(j)], d[size_t(j)]);
    double total = 0;
    for (const double v : nearest) total += v;
    const double target = uniform(gen) * total;
    int64_t pick = 0;
    if (total > 0) {
      double cumulative = 0;
      for (pick = 0; pick < n - 1; ++pick)
        if ((cumulative += nearest[size_t(pick)]) > target) break;
    } else {  // every point coincides with a seed: any point, uniformly
      pick = std::min<int64_t>(n - 1, int64_t(uniform(gen) * double(n)));
    }
    seeds.push_back(pick);
  }
  return seeds;
}

}  // namespace

// |x_j − c_i|² = |x_j|² − 2 x_j·c_i + |c_i|².
Tensor squared_distances(const Tensor& x, const Tensor& x_squared, const Tensor& centroids) {
  const Tensor c_squared = sum(centroids * centroids, {1});  // (K)
  return clamp(unsqueeze(x_squared, 1) - matmul(x, transpose(centroids, 0, 1)) * 2.0 + unsqueeze(c_squared, 0), 0.0,
               std::numeric_limits<double>::infinity());
}

KMeansResult kmeans(const Tensor& x, int64_t clusters, int64_t max_iterations, Generator& gen) {
  TP_CHECK(x.defined() && x.dim() == 2 && x.size(0) >= 1, kOp, "expected points (N, D) with N ≥ 1, got ",
           x.defined() ? to_string(x.shape()) : std::string("an undefined tensor"));
  TP_CHECK(x.dtype() == DType::Float32 || x.dtype() == DType::Float64, kOp, "expected float32 or float64 points, got ",
           x.dtype());
  const int64_t n = x.size(0), d = x.size(1);
  TP_CHECK(clusters >= 1 && clusters <= n, kOp, "the number of clusters must be in [1, N = ", n, "], got ", clusters);
  TP_CHECK(max_iterations >= 0, kOp, "max_iterations must be at least 0, got ", max_iterations);
  NoGradGuard no_grad;
  const Tensor x_squared = sum(x * x, {1});  // (N)
  const std::vector<int64_t> seeds = seed_indices(x, x_squared, clusters, gen);

  KMeansResult r;
  r.centroids = index_select(x, 0, from_vector(seeds, {clusters}, x.device()));  // (K, D)
  auto assign = [&] {
    const Tensor distances = squared_distances(x, x_squared, r.centroids);  // (N, K)
    r.inertia = sum(to(min(distances, {1}), DType::Float64)).item<double>();
    return argmin(distances, 1).to_vector<int64_t>();
  };
  r.assignment = assign();
  while (r.iterations < max_iterations && !r.converged) {
    // The update: each centroid becomes the mean of its points; an empty cluster keeps its centroid.
    const Tensor index = from_vector(r.assignment, {n}, x.device());
    const Tensor sums = index_add(zeros({clusters, d}, x.options()), 0, index, x);                        // (K, D)
    const Tensor counts = index_add(zeros({clusters}, x.options()), 0, index, ones({n}, x.options()));  // (K)
    const Tensor occupied = unsqueeze(gt(counts, zeros({}, x.options())), 1);                            // (K, 1)
    r.centroids = where(occupied, sums / unsqueeze(clamp(counts, 1.0, double(n)), 1), r.centroids);
    ++r.iterations;
    const std::vector<int64_t> previous = r.assignment;
    r.assignment = assign();
    r.converged = r.assignment == previous;
  }
  return r;
}

}  // namespace tapestry::models
