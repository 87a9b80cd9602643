/// @file
/// Gradient clipping by global norm.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace tapestry::optim {

/// The global L2 norm of the gradients of `params`, N = √(Σ_p Σ_i g_{p,i}²) (parameters whose grad()
/// is undefined contribute nothing), computed in double before any clipping. When N > max_norm, every
/// gradient is scaled in place by
///   c = max_norm / (N + 1e-6)
/// (the 1e-6 keeps c finite; after clipping the norm is just below max_norm). When N ≤ max_norm the
/// gradients are left untouched. When N is not finite (inf or NaN in a gradient) they are also left
/// untouched and N is returned, so the caller can skip the step.
/// The sum is taken in fixed chunks added in order, so N does not depend on the number of threads.
/// `params` must be defined tensors listed once each; max_norm must be finite and > 0.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace tapestry::optim
