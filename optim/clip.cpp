#include "optim/clip.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/autograd.h"
#include "core/dispatch.h"
#include "ops/common.h"
#include "ops/cuda/reduce.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/shape.h"
#include "optim/optimizer.h"

namespace tapestry::optim {

namespace {

// Σ x_i² in double, over chunks of a fixed size summed in order: the same bits for any thread count.
template <class T>
double sum_of_squares(const T* x, int64_t n) {
  constexpr int64_t kChunk = 16384;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    double s = 0;
    for (int64_t i = c * kChunk, end = std::min(n, (c + 1) * kChunk); i < end; ++i) {
      const double v = static_cast<double>(x[i]);
      s += v * v;
    }
    partial[static_cast<size_t>(c)] = s;
  }
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

// Σ g² of each gradient, in double. On the CPU, sum_of_squares above. On a GPU, a deterministic
// reduction (fixed chunks combined in a fixed order, ops/cuda/reduce.h) writes each gradient's sum
// into its slot of one float64 buffer per device, read back once: one wait per device, not per
// gradient.
std::vector<double> squared_norms(const std::vector<Tensor>& grads) {
  std::vector<double> sums(grads.size(), 0.0);
  std::map<int, Tensor> slots;  // GPU index -> (number of gradients) float64
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    const auto on_gpu = [&] {
      Tensor& buffer = slots[g.device().index];
      if (!buffer.defined()) buffer = empty({static_cast<int64_t>(grads.size())}, {DType::Float64, g.device()});
      const int64_t k = static_cast<int64_t>(i);
      cuda::sum_of_squares(contiguous(g), slice(buffer, 0, k, k + 1));
    };
    if (on_cuda("clip_grad_norm", g, on_gpu)) continue;
    const Tensor packed = contiguous(g);
    sums[i] = visit_floating(g.dtype(), "clip_grad_norm", [&](auto tag) {
      using T = decltype(tag);
      return sum_of_squares(packed.data<T>(), packed.numel());
    });
  }
  for (const auto& [index, buffer] : slots) {
    const std::vector<double> values = buffer.to_vector<double>();
    for (size_t i = 0; i < grads.size(); ++i)
      if (grads[i].device() == Device::cuda(index)) sums[i] = values[i];
  }
  return sums;
}

}  // namespace

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  detail::check_positive("clip_grad_norm", "max_norm", max_norm);
  NoGradGuard no_grad;
  std::set<const TensorImpl*> seen;
  std::vector<Tensor> grads;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    TP_CHECK(p.defined(), "clip_grad_norm", "parameter ", i, " is an undefined tensor");
    TP_CHECK(seen.insert(&p.impl()).second, "clip_grad_norm", "parameter ", i, " (shape ",
             to_string(p.shape()), ") is listed more than once");
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    grads.push_back(g);
  }

  double total = 0;
  for (double s : squared_norms(grads)) total += s;  // in parameter order, on every device
  const double norm = std::sqrt(total);
  if (std::isfinite(norm) && norm > max_norm) {
    const double scale = max_norm / (norm + 1e-6);
    for (const Tensor& g : grads) mul_(g, scale);  // in place, not recorded; bumps the version
  }
  return norm;
}

GroupNorms clip_grad_norm_by_group(const Optimizer& optimizer, double max_norm) {
  detail::check_non_negative("clip_grad_norm_by_group", "max_norm", max_norm);
  const std::vector<Tensor>& params = optimizer.parameters();
  const std::vector<ParamGroup>& groups = optimizer.param_groups();
  GroupNorms norms;
  norms.groups.assign(groups.size(), 0.0);
  std::vector<bool> joins(params.size(), false);
  for (size_t g = 0; g < groups.size(); ++g) {
    const ParamGroup& group = groups[g];
    if (group.clip.policy == ClipPolicy::Global) {
      for (size_t i : group.params) joins[i] = true;
    } else if (group.clip.policy == ClipPolicy::Own) {
      std::vector<Tensor> own;
      for (size_t i : group.params) own.push_back(params[i]);
      norms.groups[g] = clip_grad_norm(own, group.clip.max_norm);
    }
  }
  if (max_norm == 0) return norms;
  std::vector<Tensor> global;
  for (size_t i = 0; i < params.size(); ++i)
    if (joins[i]) global.push_back(params[i]);
  norms.global = clip_grad_norm(global, max_norm);
  return norms;
}

}  // namespace tapestry::optim
