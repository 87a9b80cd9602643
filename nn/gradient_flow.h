/// @file
/// The gradient that each of several losses sends into the same tensors, one backward pass per
/// loss over one recorded forward (the tape retains its entries between the passes), and how those
/// gradients compare: their norms and the cosine between each pair. With it one can see whether a
/// model's auxiliary losses (ClusterFormer's µ·L1 and ν·L2) pull its weights with the task loss or
/// against it.
///
///   const auto out = model.forward(tokens, lengths, gen);
///   const std::vector<std::vector<Tensor>> g =
///       nn::separate_gradients({task_loss, mu_l1, nu_l2}, {layer.w_q, out.layers[0].input});
///   const nn::GradientComparison c = nn::compare_gradients(g[0]);   // w_q: norms, cosines
#pragma once

#include <vector>

#include "core/tensor.h"

namespace tapestry::nn {

/// gradients[t][l]: the gradient of losses[l] (0-d) with respect to targets[t], of targets[t]'s shape
/// (zeros where loss l does not reach target t). One backward pass per loss, in order, each
/// retaining the tape; then one pass from their sum with a zero seed releases every entry they ran
/// (it adds zeros to the gradients it passes). Targets are parameters (leaves) or tensors
/// computed in the forward pass (their gradient is retained, Tensor::retain_grad). The targets'
/// accumulated gradients are dropped before each pass and at the end (grad() is then undefined);
/// other tensors' gradients accumulate the sum of all the losses' as in one backward. A target
/// that does not require grad gets zeros. Throws Error naming the function for a loss that is not
/// 0-d, or undefined tensors.
std::vector<std::vector<Tensor>> separate_gradients(const std::vector<Tensor>& losses,
                                                    const std::vector<Tensor>& targets);

/// Norms of gradients of one tensor and the cosines between them.
struct GradientComparison {
  std::vector<double> norms;                 ///< ‖g_i‖₂
  std::vector<std::vector<double>> cosines;  ///< cosines[i][j] = ⟨g_i, g_j⟩ / (‖g_i‖ ‖g_j‖); NaN when a norm is 0
};

/// The L2 norm of each gradient and the cosine of each pair, computed in float64. The gradients
/// must all have one shape; throws Error naming the function otherwise.
GradientComparison compare_gradients(const std::vector<Tensor>& gradients);

}  // namespace tapestry::nn
