// Reductions along dims. `dims` may be negative; an empty list reduces nothing. KeepDim::Yes keeps
// reduced dims with size 1. The overloads without dims reduce everything to a 0-d tensor.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace tapestry {

enum class KeepDim { No, Yes };

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, KeepDim keepdim = KeepDim::No);
Tensor sum(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, KeepDim keepdim = KeepDim::No);
Tensor mean(const Tensor& x);
// max / min: the gradient is shared equally among tied maxima (minima).
Tensor max(const Tensor& x, const std::vector<int64_t>& dims, KeepDim keepdim = KeepDim::No);
Tensor max(const Tensor& x);
Tensor min(const Tensor& x, const std::vector<int64_t>& dims, KeepDim keepdim = KeepDim::No);
Tensor min(const Tensor& x);
// log Σ exp(x), stable for large |x|; −inf where every element is −inf.
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, KeepDim keepdim = KeepDim::No);
// Σ (x − mean)² / (N − correction); correction = 1 is the unbiased estimate.
Tensor var(const Tensor& x, const std::vector<int64_t>& dims, KeepDim keepdim = KeepDim::No,
           int64_t correction = 1);

// Index (int64) of the first maximum / minimum along dim; no gradient.
Tensor argmax(const Tensor& x, int64_t dim, KeepDim keepdim = KeepDim::No);
Tensor argmin(const Tensor& x, int64_t dim, KeepDim keepdim = KeepDim::No);

}  // namespace tapestry
