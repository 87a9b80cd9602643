#include "nn/gradient_flow.h"

#include <cmath>
#include <limits>

#include "core/autograd.h"
#include "core/error.h"
#include "ops/creation.h"
#include "ops/elementwise.h"

namespace tapestry::nn {

namespace {

constexpr const char* kSeparate = "separate_gradients";
constexpr const char* kCompare = "compare_gradients";

}  // namespace

std::vector<std::vector<Tensor>> separate_gradients(const std::vector<Tensor>& losses,
                                                    const std::vector<Tensor>& targets) {
  for (size_t l = 0; l < losses.size(); ++l) {
    TP_CHECK(losses[l].defined(), kSeparate, "loss ", l, " is undefined");
    TP_CHECK(losses[l].numel() == 1 && losses[l].dim() == 0, kSeparate, "loss ", l, " must be 0-d, got shape ",
             to_string(losses[l].shape()));
  }
  for (size_t t = 0; t < targets.size(); ++t) {
    TP_CHECK(targets[t].defined(), kSeparate, "target ", t, " is undefined");
    if (targets[t].requires_grad() && !targets[t].is_leaf()) targets[t].retain_grad();
  }
  std::vector<std::vector<Tensor>> gradients(targets.size());
  Tensor all;  // Σ losses that require grad: what the releasing pass runs back from
  for (size_t l = 0; l < losses.size(); ++l) {
    for (const Tensor& target : targets)
      if (target.requires_grad()) target.zero_grad();
    // Every pass keeps the tape, so that the next loss runs back over the same entries.
    if (losses[l].requires_grad()) {
      backward(losses[l], Tensor(), Retain::Yes);
      all = all.defined() ? all + losses[l] : losses[l];
    }
    for (size_t t = 0; t < targets.size(); ++t) {
      const Tensor g = targets[t].requires_grad() ? targets[t].grad() : Tensor();
      gradients[t].push_back(g.defined() ? g : zeros(targets[t].shape(), targets[t].options()));
    }
  }
  // A last pass with a zero seed runs every entry that some loss reached and releases it (a pass
  // releases only the entries it ran, and no single loss need reach them all); it adds zeros.
  if (all.defined()) backward(all, zeros({}, all.options()), Retain::No);
  for (const Tensor& target : targets)
    if (target.requires_grad()) target.zero_grad();
  return gradients;
}

GradientComparison compare_gradients(const std::vector<Tensor>& gradients) {
  std::vector<std::vector<double>> values;
  for (size_t i = 0; i < gradients.size(); ++i) {
    TP_CHECK(gradients[i].defined(), kCompare, "gradient ", i, " is undefined");
    TP_CHECK(gradients[i].shape() == gradients[0].shape(), kCompare, "gradient ", i, " has shape ",
             to_string(gradients[i].shape()), " but gradient 0 has ", to_string(gradients[0].shape()));
    values.push_back(gradients[i].to_vector<double>());
  }
  const auto dot = [](const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (size_t e = 0; e < a.size(); ++e) s += a[e] * b[e];
    return s;
  };
  GradientComparison c;
  for (const auto& v : values) c.norms.push_back(std::sqrt(dot(v, v)));
  c.cosines.assign(values.size(), std::vector<double>(values.size(), std::numeric_limits<double>::quiet_NaN()));
  for (size_t i = 0; i < values.size(); ++i)
    for (size_t j = 0; j < values.size(); ++j)
      if (c.norms[i] > 0 && c.norms[j] > 0) c.cosines[i][j] = dot(values[i], values[j]) / (c.norms[i] * c.norms[j]);
  return c;
}

}  // namespace tapestry::nn
