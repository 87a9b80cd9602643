#include "ops/gradcheck.h"

#include <cmath>
#include <sstream>

#include "core/autograd.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/shape.h"

namespace tapestry {

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  std::vector<Tensor> leaves;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    TP_CHECK(t.defined(), "gradcheck", "input ", i, " is undefined");
    if (!is_floating(t.dtype())) {
      leaves.push_back(t);
      continue;
    }
    TP_CHECK(t.dtype() == DType::Float64, "gradcheck", "input ", i, " is ", t.dtype(),
             "; finite differences need float64 (convert with to(x, DType::Float64))");
    Tensor leaf = to(clone(t.detach()), Device::cpu());
    leaf.set_requires_grad(true);
    leaves.push_back(leaf);
  }

  // ⟨w, fn(inputs)⟩ with w fixed by the seed.
  Tensor w;
  auto objective = [&](const std::vector<Tensor>& args) {
    const Tensor y = fn(args);
    TP_CHECK(y.defined() && y.dtype() == DType::Float64, "gradcheck",
             "fn must return a float64 tensor");
    const Tensor y_cpu = to(y, Device::cpu());
    if (!w.defined()) {
      Generator gen(options.seed);
      const Tensor u = rand(y.shape(), gen, {DType::Float64});
      const Tensor sign = rand(y.shape(), gen, {DType::Float64});
      w = where(lt(sign, scalar(0.5, {DType::Float64})), -(u + 0.5), u + 0.5);
    }
    return sum(y_cpu * w);
  };

  GradcheckResult result;
  const Tensor value = objective(leaves);
  if (value.requires_grad()) value.backward();

  double worst = 0;
  NoGradGuard no_grad;
  for (size_t i = 0; i < leaves.size(); ++i) {
    Tensor& leaf = leaves[i];
    if (!leaf.requires_grad()) continue;
    const Tensor grad = leaf.grad();
    const std::vector<double> analytic =
        grad.defined() ? grad.to_vector<double>() : std::vector<double>(leaf.numel(), 0.0);
    double* data = leaf.data<double>();  // a contiguous CPU clone: element k at data[k]
    for (int64_t k = 0; k < leaf.numel(); ++k) {
      const double saved = data[k];
      data[k] = saved + options.eps;
      const double plus = objective(leaves).item<double>();
      data[k] = saved - options.eps;
      const double minus = objective(leaves).item<double>();
      data[k] = saved;
      const double numeric = (plus - minus) / (2 * options.eps);
      const double excess = std::abs(analytic[k] - numeric) - (options.atol + options.rtol * std::abs(numeric));
      if (excess > worst || std::isnan(analytic[k]) != std::isnan(numeric)) {
        worst = std::isnan(excess) ? INFINITY : excess;
        std::ostringstream out;
        out << "gradcheck failed: input " << i << " " << to_string(leaf.shape()) << " at index "
            << index_string(k, leaf.shape()) << ": analytic " << analytic[k] << ", numeric "
            << numeric << " (tolerance " << options.atol << " + " << options.rtol << "·|numeric|)";
        result.ok = false;
        result.report = out.str();
      }
    }
  }
  result.worst_error = worst;
  return result;
}

}  // namespace tapestry
