/// @file
/// Gradient clipping by global norm, and by the clipping policy of each parameter group.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "optim/optimizer.h"

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

/// The norms clip_grad_norm_by_group measured, before clipping.
struct GroupNorms {
  /// Of the gradients of the groups that join the global clip; 0 when max_norm is 0 (not measured).
  double global = 0.0;
  /// Per group (Optimizer::param_groups() order): the norm of its gradients for a group clipped on its
  /// own (ClipPolicy::Own), 0 for the others.
  std::vector<double> groups;
};

/// Clips the gradients of `optimizer`'s parameters as their groups say (optim/param_groups.h):
///   ClipPolicy::Global  the groups' gradients together, in parameter order, by clip_grad_norm(·, max_norm);
///                       max_norm = 0 leaves them as they are
///   ClipPolicy::Own     each such group's gradients by clip_grad_norm(·, its max_norm), alone: they
///                       neither count in nor are scaled by the global norm
///   ClipPolicy::None    untouched, and out of the global norm
/// Without groups this is clip_grad_norm(optimizer.parameters(), max_norm) when max_norm > 0, bit for
/// bit, and nothing when it is 0. max_norm must be finite and ≥ 0.
GroupNorms clip_grad_norm_by_group(const Optimizer& optimizer, double max_norm);

}  // namespace tapestry::optim
