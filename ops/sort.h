/// @file
/// Sorting along a dim: stable sort, argsort, top-k. (argmax / argmin are reductions: ops/reduce.h.)
///
/// Each row along `dim` is ordered on its own; rows are independent and sorted in parallel. The
/// order is stable: equal keys keep their original order (ascending index), in both directions.
/// NaN counts as larger than every number: last when ascending, first when descending (as torch).
/// Indices are int64 positions along `dim`. The values are differentiable: dx = dy scattered back
/// to the positions the values came from (scatter_add(0, dim, indices, dy)).
#pragma once

#include "core/tensor.h"

namespace tapestry {

/// Whether sort and argsort order ascending (No) or descending (Yes).
enum class Descending { No, Yes };
/// Which end of the order topk keeps.
enum class TopK { Largest, Smallest };

/// values = gather(x, dim, indices).
struct Sorted {
  Tensor values;   ///< the entries of x in that order along dim (topk: the first k)
  Tensor indices;  ///< int64
};

/// x (numeric, at least 1-d) sorted along dim; both outputs have x's shape.
Sorted sort(const Tensor& x, int64_t dim = -1, Descending descending = Descending::No);
/// sort(x, dim, descending).indices, without the values.
Tensor argsort(const Tensor& x, int64_t dim = -1, Descending descending = Descending::No);
/// The first k entries of the stable order along dim (largest first, or smallest first), so ties
/// go to the lower index; 0 <= k <= x.size(dim). Outputs have x's shape with size k along dim.
Sorted topk(const Tensor& x, int64_t k, int64_t dim = -1, TopK which = TopK::Largest);

}  // namespace tapestry
