/// @file
/// Reductions along dims. `dims` may be negative; an empty list reduces nothing. KeepDim::Yes keeps
/// reduced dims with size 1. The overloads without dims reduce everything to a 0-d tensor.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace tapestry {

/// Whether a reduction removes its reduced dims (No) or keeps them with size 1 (Yes).
enum class KeepDim { No, Yes };

///@{
/// Σ x over dims (numeric dtypes; integer sums wrap as in ops/elementwise.h). dx = dy broadcast
/// back over the reduced dims.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, KeepDim keepdim = KeepDim::No);
Tensor sum(const Tensor& x);
///@}
///@{
/// The sum divided by the number of elements reduced (floating x).
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, KeepDim keepdim = KeepDim::No);
Tensor mean(const Tensor& x);
///@}
///@{
/// max / min: the gradient is shared equally among tied maxima (minima).
Tensor max(const Tensor& x, const std::vector<int64_t>& dims, KeepDim keepdim = KeepDim::No);
Tensor max(const Tensor& x);
Tensor min(const Tensor& x, const std::vector<int64_t>& dims, KeepDim keepdim = KeepDim::No);
Tensor min(const Tensor& x);
///@}
/// log Σ exp(x), stable for large |x|; −inf where every element is −inf.
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, KeepDim keepdim = KeepDim::No);
/// Σ (x − mean)² / (N − correction); correction = 1 is the unbiased estimate.
Tensor var(const Tensor& x, const std::vector<int64_t>& dims, KeepDim keepdim = KeepDim::No,
           int64_t correction = 1);

/// √var: the standard deviation (torch.std; named stddev so that it cannot clash with namespace std
/// in code that says `using namespace tapestry`). Its gradient is 0 for a group whose elements are
/// all equal (where the derivative of √ is infinite), as in PyTorch.
Tensor stddev(const Tensor& x, const std::vector<int64_t>& dims, KeepDim keepdim = KeepDim::No,
              int64_t correction = 1);
///@{
/// The p-norm along dims: p = 1: Σ|x|; p = 2: √Σx² (gradient x / ‖x‖, and 0 where the norm is 0);
/// p = inf: max |x| (the gradient shared among tied largest |x|). Other p are refused. NaN propagates.
/// The overload without dims takes every element.
Tensor norm(const Tensor& x, double p, const std::vector<int64_t>& dims, KeepDim keepdim = KeepDim::No);
Tensor norm(const Tensor& x, double p = 2.0);
///@}

/// Running sums along dim: y[..., i, ...] = Σ_{j ≤ i} x[..., j, ...] (numeric dtypes; float32 adds in
/// double, integers wrap as in ops/elementwise.h). A NaN makes every later sum NaN.
Tensor cumsum(const Tensor& x, int64_t dim);

///@{
/// Index (int64) of the first maximum / minimum along dim; no gradient.
Tensor argmax(const Tensor& x, int64_t dim, KeepDim keepdim = KeepDim::No);
Tensor argmin(const Tensor& x, int64_t dim, KeepDim keepdim = KeepDim::No);
///@}

}  // namespace tapestry
