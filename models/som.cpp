#include "models/som.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/autograd.h"
#include "core/creation.h"
#include "models/kmeans.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/sort.h"

namespace tapestry::models {

namespace {

constexpr const char* kOp = "som";

// |g_i − g_k|² between the lattice positions of every pair of units: (K, K) float64 on the host.
std::vector<double> lattice_distances(int64_t rows, int64_t cols) {
  const int64_t k = rows * cols;
  std::vector<double> d(size_t(k * k));
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j) {
      const double dr = double(i / cols - j / cols), dc = double(i % cols - j % cols);
      d[size_t(i * k + j)] = dr * dr + dc * dc;
    }
  return d;
}

}  // namespace

SomResult som(const Tensor& x, const SomOptions& o, Generator& gen) {
  TP_CHECK(x.defined() && x.dim() == 2 && x.size(0) >= 1, kOp, "expected points (N, D) with N ≥ 1, got ",
           x.defined() ? to_string(x.shape()) : std::string("an undefined tensor"));
  TP_CHECK(x.dtype() == DType::Float32 || x.dtype() == DType::Float64, kOp, "expected float32 or float64 points, got ",
           x.dtype());
  const int64_t n = x.size(0), k = o.units;
  TP_CHECK(k >= 1 && k <= n, kOp, "the number of units must be in [1, N = ", n, "], got ", k);
  TP_CHECK(o.epochs >= 1, kOp, "epochs must be at least 1, got ", o.epochs);
  TP_CHECK(o.final_sigma > 0 && std::isfinite(o.final_sigma), kOp, "final_sigma must be positive and finite, got ",
           o.final_sigma);
  NoGradGuard no_grad;

  SomResult r;
  for (r.rows = int64_t(std::sqrt(double(k))); k % r.rows != 0; --r.rows) {
  }
  r.cols = k / r.rows;
  const Tensor lattice = to(from_vector(lattice_distances(r.rows, r.cols), {k, k}, x.device()), x.dtype());  // (K, K)
  const Tensor chosen = to(slice(argsort(rand({n}, gen), 0), 0, 0, k), x.device());                 // (K)
  r.weights = index_select(x, 0, chosen);                                                           // (K, D)

  const Tensor x_squared = sum(x * x, {1});  // (N)
  const auto best_matching = [&] { return argmin(squared_distances(x, x_squared, r.weights), 1); };  // (N)
  const double first_sigma = std::max(double(std::max(r.rows, r.cols)) / 2, o.final_sigma);
  for (int64_t t = 0; t < o.epochs; ++t) {
    const double progress = o.epochs > 1 ? double(t) / double(o.epochs - 1) : 1.0;
    const double sigma = first_sigma * std::pow(o.final_sigma / first_sigma, progress);
    const Tensor h = exp(lattice * (-1.0 / (2 * sigma * sigma)));  // (K, K) h_ik, symmetric
    const Tensor weights = index_select(h, 0, best_matching());     // (N, K) h_{b_j k}
    const Tensor mass = unsqueeze(sum(weights, {0}), 1);            // (K, 1) Σ_j h_{b_j k}
    const Tensor reached = gt(mass, zeros({}, x.options()));
    r.weights = where(reached, matmul(transpose(weights, 0, 1), x) / clamp(mass, std::numeric_limits<float>::min(), HUGE_VAL), r.weights);
  }
  const Tensor distances = squared_distances(x, x_squared, r.weights);  // (N, K)
  r.quantization_error = sum(to(min(distances, {1}), DType::Float64)).item<double>();
  r.assignment = argmin(distances, 1).to_vector<int64_t>();
  return r;
}

}  // namespace tapestry::models
