#include "models/centroids.h"

#include "core/creation.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/shape.h"
#include "ops/sort.h"

namespace tapestry::models {

Centroids::Centroids(const Tensor& x, int64_t k, double scale, PointMap map, Generator& gen)
    : Module("NeuralClustering") {
  const Tensor chosen = tapestry::to(slice(argsort(rand({x.size(0)}, gen), 0), 0, 0, k), x.device());  // (k)
  centroids = register_parameter("centroids", index_select(x, 0, chosen) * scale);
  const int64_t D = x.size(1);
  if (map == PointMap::Learned)
    w_c = register_parameter("w_c", tapestry::to(one_hot(arange(D), D, x.dtype()), x.device()));
}

}  // namespace tapestry::models
